"""Defects of default schedules and generated code, each pinned by the operator that showed
it (tests/plan/specs/defects.py), checked against the reference interpreter on fresh
random inputs at awkward sizes (1, primes) on the CPU backends; Triton's interpreter and
the CUDA emulator run the same operators in test_default_triton.py and
tests/backends/cuda."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import opcheck
import pytest
from click.testing import CliRunner

from kevolve import pipeline
from kevolve.backends.registry import get
from kevolve.cli import main
from kevolve.ir.specfile import load_op
from kevolve.schedule import default_trace
from kevolve.schedule.trace import Trace

SPECS = Path(__file__).parent / "specs" / "defects.py"


def spec(name: str):
    return load_op(f"{SPECS}:{name}")


def plan(name: str, dims: dict, backend: str = "cpu"):
    return pipeline.lower(spec(name), None, dims, get(backend)).plan


def steps(p) -> dict:
    return {st.stage.name: st for k in p.kernels for st in k.steps}


@pytest.mark.parametrize("backend", ["cpu", "numba"])
@pytest.mark.parametrize("n", [1, 37, 5003, 40961])
def test_full_reduction_to_a_scalar(backend, n):
    """A 0-d output: the default once raised IndexError; now one program loops over
    chunks (the last one partial)."""
    assert not opcheck.check(spec("full_sum"), {"N": n}, get(backend))


def test_full_reduction_default_is_chunked():
    """A short full reduction loops over chunks in one program; a long one (a single
    program would stream 16M elements alone) is split across programs, each looping over
    chunks, and their partials are combined in one pass."""
    st = steps(plan("full_sum", {"N": 30011}))["total"]
    blocks = [lp.size for lp in st.reduce_loops if lp.role == "block"]
    assert st.strategy == "looped" and blocks and 1024 <= blocks[0] <= 16384
    by_name = steps(plan("full_sum", {"N": 1 << 24}))
    part, total = by_name["total_rf"], by_name["total"]
    blocks = [lp.size for lp in part.reduce_loops if lp.role == "block"]
    assert part.strategy == "looped" and blocks and 1024 <= blocks[0] <= 16384
    assert total.strategy == "single"


def test_pooling_window_stays_whole():
    """The reduce chunk once collapsed to one element ($BW = 1: a loop over single taps):
    a window of 4 under a 4096-wide tile is one 16384-element tile."""
    t = default_trace(spec("avg_pool"), {"B": 16, "C": 64, "Lin": 16384})
    assert not [m for m in t.moves if m.get("axis") == "w"], t.to_json()
    st = steps(plan("avg_pool", {"B": 16, "C": 64, "Lin": 16384}))["y"]
    assert st.strategy == "single"


@pytest.mark.parametrize("backend", ["cpu", "numba", "mtia"])
@pytest.mark.parametrize("name,dims", [("avg_pool", {"B": 2, "C": 3, "Lin": 28}),
                                       ("max_pool", {"B": 2, "C": 3, "Hin": 10, "Win": 6}),
                                       ("max_pool", {"B": 1, "C": 1, "Hin": 2, "Win": 2})])
def test_pooling_compiles_and_matches(backend, name, dims):
    """The C family once left a window extent (`ext_h_16`) undeclared in the nest that
    zeroes empty max/min reductions: it was declared inside the reduce loops."""
    assert not opcheck.check(spec(name), dims, get(backend))


@pytest.mark.parametrize("backend", ["cpu", "cuda", "hip", "mtia", "triton"])
def test_power_is_spelled_per_language(backend):
    """`**` was printed verbatim (C has no power operator, Triton none on tensors)."""
    src = pipeline.compile(spec("power"), None, {"M": 64, "K": 64}, get(backend)).source.text
    assert " ** " not in src


@pytest.mark.parametrize("backend", ["cpu", "numba"])
def test_power_matches(backend):
    assert not opcheck.check(spec("power"), {"M": 3, "K": 7}, get(backend))


@pytest.mark.parametrize("backend", ["numba", "triton"])
def test_negative_infinity_is_a_name(backend):
    src = pipeline.compile(spec("positive_max"), None, {"M": 8, "K": 64},
                           get(backend)).source.text
    assert not re.search(r"(?<![\w.'-])-?inf\b", src), "a bare inf in Python source"


@pytest.mark.parametrize("backend", ["cpu", "numba"])
def test_negative_infinity_matches(backend):
    assert not opcheck.check(spec("positive_max"), {"M": 5, "K": 67}, get(backend))


def test_matrix_vector_product_is_a_chunked_reduction():
    """A contraction with an output side of 1 is no matrix product: one row per program,
    k in wide chunks reduced as a tree (a 128x128 dot tile wasted 127/128 of its work, and
    one fp32 accumulator per output over 2**20 terms drifted by ~36 on uniform inputs)."""
    st = steps(plan("matvec", {"M": 2048, "K": 1 << 20}))["y"]
    blocks = [lp.size for lp in st.reduce_loops if lp.role == "block"]
    assert st.strategy == "looped" and blocks[0] >= 1024


@pytest.mark.parametrize("backend", ["cpu", "numba"])
def test_matrix_vector_product_is_accurate_at_length(backend):
    """KernelBench's matvec has K = 2**20; with uniform [0, 1) inputs (sums near 2**18)
    a sequential fp32 accumulator is off by tens; chunked tree sums stay within the f32
    tolerance of the float64 reference."""
    op = spec("matvec")
    dims = {"M": 3, "K": 1 << 20}

    def uniform(rng):
        return {"A": rng.random((3, 1 << 20), dtype=np.float32),
                "v": rng.random((1 << 20, 1), dtype=np.float32)}
    assert not opcheck.check(op, dims, get(backend), make=uniform, seeds=(0,))


@pytest.mark.parametrize("name", ["gemm_epilogue", "gemm_bf16"])
@pytest.mark.parametrize("backend", ["triton", "cuda", "hip", "cpu"])
def test_contraction_with_epilogue_is_a_dot(name, backend):
    """cast(sum(A*B) * alpha + bias, bf16) and a bf16 stage storing sum(A*B): the
    contraction becomes a `dot` step, the epilogue a pointwise step after it."""
    p = plan(name, {"M": 4096, "K": 4096, "Nn": 4096}, backend)
    (k,) = p.kernels
    assert [st.strategy for st in k.steps] in (["dot", "none"], ["dot"])


def test_epilogue_dot_source_uses_matrix_units():
    dims = {"M": 4096, "K": 4096, "Nn": 4096}
    tri = pipeline.compile(spec("gemm_epilogue"), None, dims, get("triton")).source.text
    assert "tl.dot(" in tri and "* 0.5" in tri.split("tl.dot(")[-1]
    cu = pipeline.compile(spec("gemm_epilogue"), None, dims, get("cuda")).source.text
    assert "wmma::mma_sync" in cu


@pytest.mark.parametrize("backend", ["cpu", "numba", "mtia"])
@pytest.mark.parametrize("name", ["gemm_epilogue", "gemm_bf16"])
def test_contraction_with_epilogue_matches(backend, name):
    assert not opcheck.check(spec(name), {"M": 17, "K": 33, "Nn": 19}, get(backend))


# stat[a0, a2] computed in y's program, inside the loop over chunks of y's a2
AT_SPLIT = Trace.make("middle_norm", [
    {"m": "bind", "stage": "y", "axis": "a0", "to": "grid"},
    {"m": "bind", "stage": "y", "axis": "a1", "to": "grid"},
    {"m": "split", "stage": "y", "axis": "a2", "size": "$B"},
    {"m": "launch", "num_warps": 8},
    {"m": "compute_at", "stage": "stat", "at": ["y", "a2o"]}], {"$B": 8192})


def test_compute_at_follows_a_split_loop():
    """stat[a0, a2] computed in y's program with y's a2 split into a loop lowers (it was
    placed at a1, outside that loop, and refused). The default no longer puts stat there:
    y's programs run over a1, which stat is not read at, so each would recompute it."""
    dims = {"D0": 4, "D1": 8, "D2": 1 << 20}
    t = default_trace(spec("middle_norm"), dims)
    assert not [m for m in t.moves if m.m == "compute_at"], t.to_json()
    for backend in ("cpu", "triton", "cuda"):
        pipeline.lower(spec("middle_norm"), AT_SPLIT, dims, get(backend))


@pytest.mark.parametrize("backend", ["cpu", "numba"])
def test_compute_at_in_split_loop_matches(backend):
    dims = {"D0": 2, "D1": 3, "D2": 5}
    assert not opcheck.check(spec("middle_norm"), dims, get(backend), trace=AT_SPLIT)
    assert not opcheck.check(spec("middle_norm"), dims, get(backend))


def test_lower_a_jagged_spec_without_its_total_length():
    """T (the values' row count) sizes a buffer only: `kevolve lower` no longer demands it."""
    res = CliRunner().invoke(main, ["lower", f"{SPECS}:jagged_sum", "--backend", "triton",
                                    "--shape", "Bj=64", "--shape", "Dj=32",
                                    "--shape", "max_len=16"])
    assert res.exit_code == 0, res.output
    assert "def launch" in res.output


BACKENDS = ("cpu", "numba", "mtia", "triton", "cuda")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_jagged_contraction_default_is_legal(backend):
    """sum over a jagged l of w[b, l - start] * values[l, d] once took the matrix-product
    default (b and d in 2-d tiles, l split in steps): l's bounds follow b, so every backend
    refused it (semantics.split_varying), and the search found nothing from it. Legal at a
    large shape on every backend, right at small ones."""
    op = spec("weighted_pool")
    pipeline.lower(op, None, {"Bp": 256, "Pp": 32, "Dp": 128, "Tp": 4096}, get(backend))
    pipeline.lower(op, None, {"Bp": 4096, "Pp": 4096, "Dp": 4096, "Tp": 1 << 24}, get(backend))
    if backend in ("cpu", "numba"):
        def make(rng):
            lens = np.array([0, 5, 1, 3, 5, 2, 0])
            off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
            return {"values": rng.standard_normal((int(off[-1]), 3)).astype(np.float32),
                    "offsets": off, "w": rng.standard_normal((7, 5)).astype(np.float32)}
        dims = {"Bp": 7, "Pp": 5, "Dp": 3, "Tp": 16}
        assert not opcheck.check(op, dims, get(backend), make=make)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_guest_reduction_tile_is_its_own(backend):
    """A segment's mean over (k, dd) computed in the program of an output that tiles the
    segment's rows and columns was counted on the output's tile as well (131072 elements
    at D=300, max_len=700: refused on cpu and numba). Legal there, and right."""
    op = spec("segment_center")
    dims = {"Bc": 3, "Dc": 300, "Tc": 1011}
    params = {"max_len": 700}

    def make(rng):
        off = np.array([0, 700, 700, 1011], np.int64)
        return {"values": rng.standard_normal((1011, 300)).astype(np.float32), "offsets": off}

    be = get(backend, **({"emulate": True} if backend == "cuda" else {}))
    pipeline.lower(op, None, {**dims, **params}, be)
    if backend in ("cpu", "numba", "mtia"):
        assert not opcheck.check(op, dims, be, params=params, make=make, seeds=(0,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_product_of_a_pointwise_producer_keeps_its_matrix_units(backend):
    """relu(A) @ B with relu a stage of its own: the default took the matrix-product tiles
    from the product's body as written, then inlined relu into it, so the step was no
    longer a dot and its 128 x 128 x 32 tile was refused on cpu, numba and mtia. The
    producer now stays a kernel of its own and the product a dot, legal everywhere."""
    op = spec("relu_mm")
    dims = {"Mr": 128, "Kr": 32, "Nr": 128}
    moves = default_trace(op, dims).resolved()
    assert not [m for m in moves if m["m"] == "inline"], moves
    plan = pipeline.lower(op, None, dims, get(backend)).plan
    assert steps(plan)["C"].strategy == "dot"
    if backend in ("cpu", "numba"):
        assert not opcheck.check(op, {"Mr": 5, "Kr": 7, "Nr": 3}, get(backend))
        assert not opcheck.check(op, dims, get(backend), seeds=(0,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_window_that_follows_an_output_axis_puts_it_on_the_grid(backend):
    """k in [j, N) read with j (no running scan): the default tiled j, so k stayed whole
    beside a tile of j (256 x N elements: refused from N = 257 on cpu and numba, and on
    every backend at N = 4096). j now goes on the grid and k is looped over in chunks."""
    op = spec("suffix_weighted")
    for dims in ({"Mw": 64, "Nw": 257}, {"Mw": 4096, "Nw": 4096}):
        pipeline.lower(op, None, dims, get(backend))
    if backend in ("cpu", "numba"):
        for dims in ({"Mw": 1, "Nw": 1}, {"Mw": 3, "Nw": 7}, {"Mw": 5, "Nw": 257}):
            assert not opcheck.check(op, dims, get(backend), seeds=(0,))
