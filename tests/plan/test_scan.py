"""Prefix reductions (cumsum and its kin) lowered with the `scan` strategy: a running value
carried along the scanned axis, O(N) per row instead of re-reading each prefix.

The recognizer (kevolve.ir.prefix) on the four window forms and on look-alikes; every
backend against the reference interpreter and torch on fresh random inputs at awkward
sizes (1, primes, non-multiples of the chunk) along the last, first and middle axis; the
plan and the generated source (no loop over the prefix); the default schedule's choice;
the legality errors of the move."""

from __future__ import annotations

import numpy as np
import opcheck
import pytest
import scanspecs
import torch

from kevolve import pipeline
from kevolve.backends.registry import get
from kevolve.ir import prefix
from kevolve.ir.builder import axes, axis, compute, dims, f32, input, sum_
from kevolve.ir.interp import run
from kevolve.ops.aten.scan import PLAN, scan_op
from kevolve.plan import lower
from kevolve.schedule import apply_trace
from kevolve.schedule.defaults import default_trace
from kevolve.schedule.errors import MoveError
from kevolve.schedule.trace import Trace

BACKENDS = ["cpu", "numba", "triton", "mtia", "cuda", "hip"]
# the C-family GPU emulations and MTIA render the same scalar walk as cpu: slow runs only
QUICK = ["cpu", "numba", "triton"] + [pytest.param(n, marks=pytest.mark.slow)
                                      for n in ("mtia", "cuda", "hip")]
SHAPES = {"last": [{"M": 1, "N": 1}, {"M": 3, "N": 1009}, {"M": 2, "N": 1031}],
          "first": [{"M": 1, "N": 1}, {"M": 131, "N": 67}, {"M": 67, "N": 1}],
          "middle": [{"A": 1, "B": 1, "C": 1}, {"A": 2, "B": 131, "C": 67}]}
DIM = {"last": -1, "first": 0, "middle": 1}


def backend(name):
    be = get(name, interpret=True) if name == "triton" else \
        get(name, emulate=True) if name in ("cuda", "hip") else get(name)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    return be


def inputs(kind: str, shape, rng) -> np.ndarray:
    if kind == "cumprod":  # magnitudes near 1, both signs: the product neither dies nor blows up
        return (rng.uniform(0.8, 1.25, size=shape) * rng.choice([-1.0, 1.0], size=shape)) \
            .astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


def torch_ref(kind: str, x: np.ndarray, dim: int) -> np.ndarray:
    t = torch.from_numpy(x).double()
    if kind in ("cummax", "cummin"):
        return getattr(torch, kind)(t, dim=dim).values.numpy()
    return getattr(torch, kind)(t, dim=dim).numpy()


# -- the recognizer ----------------------------------------------------------------------

@pytest.mark.parametrize("form,reverse,shift", [("inclusive", False, 0),
                                                ("exclusive", False, -1),
                                                ("reverse", True, 0),
                                                ("reverse_exclusive", True, 1)])
@pytest.mark.parametrize("along", [0, -1])
def test_recognizes_the_four_windows(form, reverse, shift, along):
    o = scanspecs.scan("sum", form, along)
    y = o.stage("y")
    pre, why = prefix.match(y, y.body)
    assert pre is not None, why
    assert (pre.axis, pre.reverse, pre.shift) == (y.axes[along].name, reverse, shift)


def test_look_alikes_are_not_prefix_reductions():
    y = scan_op("logcumsumexp", "last").stage("y")  # exp(x[i, k] - m[i, j]): reads j itself
    pre, why = prefix.match(y, y.body)
    assert pre is None and "'j'" in why
    M, N = dims("M N")
    x = input("x", (M, N), f32)
    i, j = axes("i j", M, N)
    k2 = axis("k", j + 2, max_extent=N + 1, reduce=True)  # a window two ahead: not a prefix
    z = compute("z", (i, j), sum_(x[i, k2 - 1], over=k2))
    assert prefix.match(z, z.body)[0] is None
    k = axis("k", N, reduce=True)  # a whole row: nothing grows with j
    w = compute("w", (i, j), sum_(x[i, k], over=k))
    assert prefix.match(w, w.body)[0] is None
    # the cummax stage of logcumsumexp is one
    m = scan_op("logcumsumexp", "last").stage("m")
    assert prefix.match(m, m.body)[0].axis == "j"


# -- correctness -------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("mode", ["last", "first", "middle"])
def test_interpreter_matches_torch(kind, mode):
    o = scan_op(kind, mode)
    rng = np.random.default_rng()
    for d in SHAPES[mode]:
        x = inputs(kind, tuple(d.values()), rng)
        np.testing.assert_allclose(run(o, {"x": x})["y"], torch_ref(kind, x, DIM[mode]),
                                   rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("form", scanspecs.FORMS)
@pytest.mark.parametrize("kind", ["sum", "prod", "max", "min"])
def test_interpreter_scans_match_a_loop_over_each_window(form, kind):
    """The interpreter folds a prefix reduction as a running value (O(N), so `kevolve run`
    can check large rows): against the window of each point, reduced on its own."""
    rng = np.random.default_rng()
    f = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[kind]
    for along, n, m in [(-1, 1, 3), (-1, 37, 4), (0, 29, 3)]:
        shape = (m, n) if along == -1 else (n, m)
        x = inputs("cumprod" if kind == "prod" else "", shape, rng)
        got = run(scanspecs.scan(kind, form, along), {"x": x})["y"]
        rows = x if along == -1 else x.T
        want = np.zeros((m, n))
        for r in range(m):
            for j in range(n):
                lo, hi = {"inclusive": (0, j + 1), "exclusive": (0, j), "reverse": (j, n),
                          "reverse_exclusive": (j + 1, n)}[form]
                w = rows[r, lo:hi].astype(np.float64)
                want[r, j] = f(w) if w.size else (1.0 if kind == "prod" else 0.0)
        np.testing.assert_allclose(got if along == -1 else got.T, want, rtol=1e-12,
                                   atol=1e-12)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("kind,mode", [(k, m) for k, ms in PLAN.items() if k != "logcumsumexp"
                                       for m in ms])
def test_catalog_scans_match_torch_and_the_interpreter(name, kind, mode):
    """The default (scan) schedule at each shape, on fresh random inputs."""
    be = backend(name)
    o = scan_op(kind, mode)
    rng = np.random.default_rng()
    for d in SHAPES[mode]:
        assert _strategy(o, d) == "scan"
        shape = tuple(d.values())
        assert not opcheck.check(o, d, be, seeds=(int(rng.integers(1 << 16)),),
                                 make=lambda r, shape=shape: {"x": inputs(kind, shape, r)})
        x = inputs(kind, shape, rng)
        kernel = pipeline.build(pipeline.compile(o, None, d, be), be)
        lib = be.tensor_lib
        import backend_checks as bc
        out = bc.nan_outputs(o, d, lib)
        kernel(bc.to_lib(o, {"x": x}, lib), out, {})
        np.testing.assert_allclose(bc.to_host(out["y"]), torch_ref(kind, x, DIM[mode]),
                                   rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("name", QUICK)
@pytest.mark.parametrize("form", scanspecs.FORMS)
@pytest.mark.parametrize("kind", ["sum", "max", "prod"])
def test_every_window_form_on_every_backend(name, form, kind):
    be = backend(name)
    rng = np.random.default_rng()
    for along, rank, d in [(-1, 2, {"M": 3, "N": 1031}), (0, 2, {"M": 67, "N": 5}),
                           (1, 3, {"A": 2, "B": 67, "C": 5}), (-1, 2, {"M": 2, "N": 1})]:
        o = scanspecs.scan(kind, form, along, rank, scale=form == "reverse")
        assert _strategy(o, d) == "scan"
        shape = tuple(d.values())
        make = lambda r, shape=shape: {  # noqa: E731
            "x": inputs("cumprod" if kind == "prod" else "", shape, r)}
        assert not opcheck.check(o, d, be, seeds=(int(rng.integers(1 << 16)),), make=make)


@pytest.mark.parametrize("name", ["cpu", "triton"])
def test_logcumsumexp_keeps_its_plain_sum(name):
    """Its sum reads m[i, j]: not a prefix reduction, so it keeps the plain lowering; its
    running max, computed in the same program along the row tile, scans. Along the first
    dim the rows are on the grid, so the max stays plain too. Both stay right."""
    for mode, want in (("last", ["scan", "single"]), ("first", ["single", "single"])):
        o = scan_op("logcumsumexp", mode)
        d = {"M": 3, "N": 67}
        plan = lower(apply_trace(o, default_trace(o, d)), d)
        assert [s.strategy for s in plan.kernels[0].steps] == want
        assert not opcheck.check(o, d, backend(name), seeds=(3,))


@pytest.mark.parametrize("name", ["cpu", "triton", "cuda"])
def test_a_scan_computed_in_another_stages_program(name):
    """logcumsumexp's running max as a scan step inside the sum's program."""
    o = scan_op("logcumsumexp", "last")
    t = Trace.from_dict({"version": 1, "op": "", "moves": [
        {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
        {"m": "compute_at", "stage": "m", "at": ["y", "i"]},
        {"m": "reduction", "stage": "m", "strategy": "scan"}]})
    d = {"M": 3, "N": 67}
    assert [s.strategy for s in lower(apply_trace(o, t), d).kernels[0].steps] == \
        ["scan", "single"]
    assert not opcheck.check(o, d, backend(name), trace=t, seeds=(5,))


# -- the plan and the source -------------------------------------------------------------

def _strategy(o, d) -> str:
    return lower(apply_trace(o, default_trace(o, d)), d).kernels[0].steps[-1].strategy


NAIVE = {"version": 1, "op": "", "moves": [{"m": "bind", "stage": "y", "axis": "i",
                                           "to": "grid"}]}


def test_the_scan_source_has_no_loop_over_the_prefix():
    """The scan walks j once; the plain lowering loops over k inside each j."""
    o = scan_op("cumsum", "last")
    d = {"M": 4, "N": 100}
    plan = lower(apply_trace(o, default_trace(o, d)), d)
    st = plan.kernels[0].steps[-1]
    assert st.strategy == "scan" and st.reduce_loops == () and st.scan.axis == "j"
    cpu, tri = get("cpu"), get("triton", interpret=True)
    scan_c = pipeline.compile(o, None, d, cpu).source.text
    naive_c = pipeline.compile(o, Trace.from_dict(NAIVE), d, cpu).source.text
    assert "r_k" in naive_c and "r_k" not in scan_c
    assert "tl.cumsum(" in pipeline.compile(o, None, d, tri).source.text
    assert scan_c.count("for (") < naive_c.count("for (") + 2  # carry init aside: no k loop


def test_the_chunk_loop_carries_the_value():
    """Split j: the running value is declared before the chunk loop, not inside it."""
    o = scan_op("cumsum", "last")
    d = {"M": 2, "N": 5000}
    src = pipeline.compile(o, None, d, get("cpu")).source.text
    assert src.index("float carry") < src.index("for (int64_t s_jo")


def test_default_schedule_picks_the_scan_for_every_catalog_scan():
    for kind, modes in PLAN.items():
        for mode in modes:
            o = scan_op(kind, mode)
            d = {n: 37 for n in ("A B C" if mode == "middle" else "M N").split()}
            scans = {dict(m.args)["stage"] for m in default_trace(o, d).moves
                     if dict(m.args).get("strategy") == "scan"}
            want = {"last": {"m"}, "first": set()}[mode] if kind == "logcumsumexp" else {"y"}
            assert scans == want, (kind, mode)


# -- legality ----------------------------------------------------------------------------

def _err(o, moves) -> MoveError:
    with pytest.raises(MoveError) as e:
        lower(apply_trace(o, Trace.from_dict({"version": 1, "op": "", "moves": moves})),
              {n: 16 for n in ("A B C" if len(o.inputs[0].shape) == 3 else "M N").split()})
    return e.value


def test_scan_on_a_stage_that_is_not_a_prefix_reduction():
    e = _err(scan_op("logcumsumexp", "last"), [{"m": "reduction", "stage": "y",
                                                "strategy": "scan"}])
    assert (e.code, e.move_index) == ("semantics.scan", 0) and "'j'" in e.message


def test_scan_axis_on_the_grid():
    e = _err(scan_op("cumsum", "last"), [{"m": "bind", "stage": "y", "axis": "i",
                                          "to": "grid"},
                                         {"m": "bind", "stage": "y", "axis": "j",
                                          "to": "grid"},
                                         {"m": "reduction", "stage": "y", "strategy": "scan"}])
    assert (e.code, e.move_index) == ("semantics.scan", 2) and "y.j" in e.message


def test_scan_with_its_reduce_axis_split():
    e = _err(scan_op("cumsum", "last"), [{"m": "split", "stage": "y", "axis": "k", "size": 4},
                                         {"m": "reduction", "stage": "y", "strategy": "scan"}])
    assert e.code == "semantics.scan" and "y.k" in e.message


def test_scan_chunk_loop_outside_another_loop():
    """j's chunk loop with another axis' chunk loop inside it: the value would restart."""
    e = _err(scan_op("cumsum", "first"), [
        {"m": "split", "stage": "y", "axis": "i", "size": 4},
        {"m": "split", "stage": "y", "axis": "j", "size": 4},
        {"m": "reorder", "stage": "y", "order": ["io", "jo", "ii", "ji"]},
        {"m": "reduction", "stage": "y", "strategy": "scan"}])
    assert e.code == "semantics.scan" and "'io'" in e.message


def test_mutations_propose_scans_and_leave_their_window_unsplit():
    import random

    from kevolve.search.proposers import mutations as mu

    o = scan_op("cumsum", "last")
    assert mu.toggle_reduce_split(default_trace(o, {"M": 4, "N": 64}), random.Random(0),
                                  o) is None
    naive = Trace.from_dict(NAIVE)
    got = {dict(m.args).get("strategy") for seed in range(20)
           for m in mu.reduction_strategy(naive, random.Random(seed), o).moves
           if m.m == "reduction"}
    assert "scan" in got
    m = scan_op("logcumsumexp", "last")
    assert all(dict(x.args).get("strategy") != "scan" or dict(x.args)["stage"] == "m"
               for seed in range(20)
               for x in mu.reduction_strategy(Trace.from_dict(NAIVE), random.Random(seed),
                                              m).moves if x.m == "reduction")


@pytest.mark.parametrize("name", ["cpu", "numba", "triton", "cuda"])
def test_a_whole_scan_tile_inside_another_axis_chunk_loop(name):
    """cumsum along the first dim, the columns looped over in chunks inside the program
    and the rows one tile: the scan runs whole within each chunk."""
    o = scan_op("cumsum", "first")
    t = Trace.from_dict({"version": 1, "op": "", "moves": [
        {"m": "split", "stage": "y", "axis": "j", "size": 8},
        {"m": "reorder", "stage": "y", "order": ["jo", "i", "ji"]},
        {"m": "reduction", "stage": "y", "strategy": "scan"}]})
    d = {"M": 37, "N": 29}
    st = lower(apply_trace(o, t), d).kernels[0].steps[-1]
    assert (st.strategy, st.level) == ("scan", "jo")
    assert not opcheck.check(o, d, backend(name), trace=t, seeds=(11,))
