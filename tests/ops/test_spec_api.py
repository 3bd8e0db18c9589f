"""The spec API (define, lengths, domain), inputs derived from the IR, and the one resolver
(library name, spec file, `kevolve.ops` entry point)."""

import sys
import textwrap

import numpy as np
import pytest
import torch

from kevolve import ops
from kevolve.ir.builder import (
    axes,
    compute,
    dims,
    eq,
    exp,
    f32,
    i64,
    input,
    jagged_axis,
    log,
    max_,
    op,
    param,
    reduce_axis,
    sqrt,
    sum_,
    where,
)
from kevolve.ir.errors import SpecError
from kevolve.ir.interp import run
from kevolve.ops import define, domain, lengths


def segment_max_op():
    T, B, D = dims("T B D")
    values = input("values", (T, D), f32)
    offsets = input("offsets", (B + 1,), i64)
    b, d = axes("b d", B, D)
    k = jagged_axis("k", start=offsets[b], end=offsets[b + 1], max_extent=param("max_len"),
                    reduce=True)
    out = compute("out", (b, d), where(offsets[b + 1] > offsets[b], max_(values[k, d], over=k),
                                       0.0))
    return op("segment_max", inputs=[values, offsets], outputs=[out])


def gather_log_op():
    """out[i] = log(w[idx[i]]) / z[i]: a gather, a positive and a nonzero input."""
    (n, V) = dims("n V")
    w = input("w", (V,), f32)
    idx = input("idx", (n,), i64)
    z = input("z", (n,), f32)
    (i,) = axes("i", n)
    out = compute("out", (i,), log(w[idx[i]]) / z[i] + sqrt(w[idx[i]]))
    return op("gather_log", inputs=[w, idx, z], outputs=[out])


def cross_entropy_op():
    M, C = dims("M C")
    x = input("x", (M, C), f32)
    target = input("target", (M,), i64)
    (i,) = axes("i", M)
    k = reduce_axis("k", C)
    mx = compute("mx", (i,), max_(x[i, k], over=k))
    lse = compute("lse", (i,), log(sum_(exp(x[i, k] - mx[i]), over=k)) + mx[i])
    pick = compute("pick", (i,), sum_(where(eq(k, target[i]), x[i, k], 0.0), over=k))
    loss = compute("loss", (i,), lse[i] - pick[i])
    return op("cross_entropy_rows", inputs=[x, target], outputs=[loss])


def _segment_max_torch(t, p):
    v, off = t["values"], t["offsets"]
    out = torch.segment_reduce(v, "max", offsets=off, axis=0, unsafe=True)
    empty = (off[1:] == off[:-1])[:, None]
    return torch.where(empty, torch.zeros_like(out), out)


def test_define_derives_presets_edges_and_jagged_inputs():
    d = define(segment_max_op(), reference=_segment_max_torch,
               inputs={"offsets": lengths("skewed")})
    assert set(d.shapes) == {"small", "cpu", "gpu"}
    assert set(d.shapes["small"]) == {"B", "D", "max_len", "lengths"}  # T comes from offsets
    assert {e["lengths"] for e in d.edge_shapes} >= {"empty", "one_long", "full"}
    assert d.dims({"B": 4, "D": 3, "max_len": 5}) == {"B": 4, "D": 3, "max_len": 5, "T": 20}
    for sd in ("small", *d.edge_shapes):
        for seed in (0, 1):
            c = d.case(sd, seed)
            off = c.inputs["offsets"]
            lens = np.diff(off)
            assert off[0] == 0 and c.inputs["values"].shape[0] == off[-1]
            assert (lens >= 0).all() and (lens <= c.params["max_len"]).all()
            got = run(d.op, c.inputs, c.params)["out"]
            t = {k: torch.from_numpy(v) for k, v in c.inputs.items()}
            np.testing.assert_allclose(got, d.torch_eager(t, c.params)["out"].numpy(),
                                       rtol=1e-6)
    assert (np.diff(d.case("small").inputs["offsets"]) == 0).any()
    assert np.diff(d.case({"B": 6, "D": 2, "max_len": 4, "lengths": "empty"})
                   .inputs["offsets"]).sum() == 0


def test_inputs_from_the_ir_gathers_and_domains():
    d = define(gather_log_op())
    assert "V" in d.shapes["small"] and "n" in d.shapes["small"]
    for seed in range(3):
        c = d.case({"n": 50, "V": 7}, seed)
        assert c.inputs["idx"].min() >= 0 and c.inputs["idx"].max() < 7
        assert (c.inputs["w"] > 0).all(), "log and sqrt read w: drawn positive"
        assert (np.abs(c.inputs["z"]) >= 0.5).all(), "z divides: drawn away from 0"
        assert np.isfinite(run(d.op, c.inputs, c.params)["out"]).all()


def test_a_label_compared_with_an_axis_draws_from_its_extent():
    d = define(cross_entropy_op(), reference=lambda t, p: torch.nn.functional.cross_entropy(
        t["x"], t["target"], reduction="none"))
    c = d.case({"M": 40, "C": 5}, 0)
    assert c.inputs["target"].min() >= 0 and c.inputs["target"].max() < 5
    t = {k: torch.from_numpy(v) for k, v in c.inputs.items()}
    np.testing.assert_allclose(run(d.op, c.inputs)["loss"], d.torch_eager(t, {})["loss"],
                               rtol=1e-5)


def test_declared_domain_wins():
    d = define(gather_log_op(), inputs={"z": domain(2.0, 3.0)})
    z = d.case({"n": 100, "V": 4}, 0).inputs["z"]
    assert z.min() >= 2.0 and z.max() <= 3.0
    with pytest.raises(SpecError, match="not an input"):
        define(gather_log_op(), inputs={"nope": domain(positive=True)})
    with pytest.raises(SpecError, match="length distribution .zipfian"):
        lengths("zipfian")


def test_reference_by_name_and_output_forms():
    M, N = dims("M N")
    x = input("x", (M, N), f32)
    i = axes("i", M)[0]
    k = reduce_axis("k", N)
    mx = compute("mx", (i,), max_(x[i, k], over=k))
    y = compute("y", (i,), log(sum_(exp(x[i, k] - mx[i]), over=k)) + mx[i])
    lse = op("lse", inputs=[x], outputs=[y])
    c = define(lse).case("small")
    t = {"x": torch.from_numpy(c.inputs["x"])}
    want = run(lse, c.inputs)["y"]
    for ref in ("torch.logsumexp(dim=-1)", lambda t, p: (torch.logsumexp(t["x"], -1),),
                lambda t, p: {"y": torch.logsumexp(t["x"], -1)}):
        got = define(lse, reference=ref).torch_eager(t, {})["y"]
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    assert define(lse, reference="aten.logsumexp(dim=[1])").torch_eager(t, {})["y"].shape == (
        c.inputs["x"].shape[0],)
    with pytest.raises(SpecError, match="torch"):
        define(lse, reference="numpy.max")
    assert define(lse).torch_eager is None and not define(lse).has_reference


def test_presets_given_and_checked():
    d = define(gather_log_op(), presets={"small": {"n": 3, "V": 2}, "tiny": {"n": 1, "V": 1}})
    assert d.shapes["small"] == {"n": 3, "V": 2} and "cpu" in d.shapes and "tiny" in d.shapes
    with pytest.raises(SpecError, match="'V'"):
        define(gather_log_op(), presets={"small": {"n": 3}})


def test_backward_is_kept():
    fwd, bwd = gather_log_op(), segment_max_op()
    assert define(fwd, backward=bwd).backward is bwd


SPEC = textwrap.dedent("""\
    from kevolve.ir.builder import axes, compute, dims, f32, input, op, sigmoid
    from kevolve.ops import define

    n = dims("n")
    x = input("x", (n,), f32)
    (i,) = axes("i", n)
    silu = op("silu", inputs=[x], outputs=[compute("y", (i,), x[i] * sigmoid(x[i]))])
    SILU = define(silu, reference="F.silu", doc="y = silu(x)")
    """)


def test_a_spec_file_binds_an_op_or_a_definition(tmp_path):
    p = tmp_path / "spec.py"
    p.write_text(SPEC)
    for ref in (str(p), f"{p}:SILU"):  # the OpDef wraps the Op: one op in the file
        d = ops.resolve(ref)
        assert d.name == "silu" and d.doc == "y = silu(x)" and d.has_reference
        assert d.ref == f"{p}:SILU"
    bare = ops.resolve(f"{p}:silu")
    assert bare.op == d.op and not bare.has_reference and bare.ref == f"{p}:silu"
    assert ops.resolve(ops.resolve(f"{p}:SILU").ref).name == "silu"  # found again


def test_library_ops_resolve_to_their_definitions():
    d = ops.resolve("softmax")
    assert d.op is ops.LIBRARY["softmax"].op and d.ref == "softmax" and d.has_reference


PLUGIN = textwrap.dedent("""\
    from kevolve.ir.builder import axes, compute, dims, f32, input, op
    from kevolve.ops import define

    def _op():
        n = dims("n")
        x = input("x", (n,), f32)
        (i,) = axes("i", n)
        return op("double_it", inputs=[x], outputs=[compute("y", (i,), x[i] * 2.0)])

    DOUBLE = define(_op(), reference=lambda t, p: t["x"] * 2)
    """)


def install_plugin(root) -> None:
    """A package that installs the op `double_it` through the kevolve.ops group."""
    (root / "kvplug").mkdir()
    (root / "kvplug" / "__init__.py").write_text(PLUGIN)
    info = root / "kvplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kvplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[kevolve.ops]\ndouble_it = kvplug:DOUBLE\n")


def test_an_installed_op_resolves_through_the_entry_point_group(tmp_path, monkeypatch):
    install_plugin(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert ops.plugins() == {"double_it": "kvplug:DOUBLE"}
    d = ops.resolve("double_it")
    assert d.name == "double_it" and d.ref == "double_it"
    c = d.case("small")
    assert np.allclose(run(d.op, c.inputs)["y"], 2 * c.inputs["x"])
    with pytest.raises(KeyError, match="double_it"):
        ops.resolve("triple_it")
    sys.modules.pop("kvplug", None)
