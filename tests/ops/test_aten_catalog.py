"""The ATen catalog (kevolve.ops.aten): every op's spec, run by the reference interpreter,
agrees with its torch reference in float64 on fresh random inputs at its small preset and
edge shapes (every dim 1, primes, 16-bit dtypes where it has variants), two seeds; every
op resolves as `aten.NAME`; the families are what the issue asks for."""

from __future__ import annotations

import numpy as np
import pytest

from kevolve import ops
from kevolve.errors import UnknownName
from kevolve.evaluate.conform import conform, conform_shapes, share
from kevolve.ops import aten

FAMILIES = ("unary", "binary", "comparison", "reduction", "scan", "softmax", "norm",
            "matmul", "conv", "pooling", "loss", "indexing", "shape", "jagged")


def test_catalog_size_and_families():
    assert len(aten.CATALOG) >= 200
    assert aten.FAMILIES == FAMILIES
    for fam in FAMILIES:
        assert aten.names(fam), fam
    for name, d in aten.CATALOG.items():
        assert d.name == f"aten.{name}"
        assert d.has_reference, name


@pytest.mark.parametrize("name", aten.names())
def test_spec_agrees_with_torch(name):
    d = aten.get(name)
    r = conform(d, seeds=(0, 1))
    assert r.ok, f"{r.verdict}: {r.reason}"
    shapes = conform_shapes(d)
    assert len(shapes) >= 3  # the small preset and at least two edge shapes


def test_inputs_are_random_and_fresh():
    d = aten.get("gelu")
    a, b = d.case("small", 0).inputs["x"], d.case("small", 1).inputs["x"]
    assert np.unique(a).size > 1 and not np.array_equal(a, b)


def test_resolve_by_prefixed_name():
    d = ops.resolve("aten.softmax_last")
    assert d.ref == "aten.softmax_last" and d.name == "aten.softmax_last"
    with pytest.raises(UnknownName, match="similar: aten.softmax"):
        ops.resolve("aten.softmax")
    with pytest.raises(UnknownName, match="aten.NAME"):
        ops.resolve("no_such_op")


def test_select_families_and_names():
    assert aten.select("scan") == aten.names("scan")
    sel = aten.select("aten.relu,softmax")
    assert sel[0] == "relu" and set(aten.names("softmax")) <= set(sel)
    with pytest.raises(UnknownName):
        aten.select("nonsense")


def test_share_rotates_through_everything():
    names = aten.names()
    parts = [share(names, f"{k}/5") for k in range(5)]
    assert sorted(sum(parts, [])) == sorted(names)
    with pytest.raises(ValueError):
        share(names, "5/5")


def test_a_wrong_spec_is_caught():
    """The check is not vacuous: a spec whose formula differs from its reference fails."""
    from kevolve.ir.builder import axes, compute, dims, f32, input, maximum, op
    from kevolve.ops.aten._entry import entry

    M, N = dims("M N")
    x = input("x", (M, N), f32)
    i, j = axes("i j", M, N)
    wrong = entry(op("relu", inputs=[x], outputs=[
        compute("y", (i, j), maximum(x[i, j], 0.01))]), "torch.relu")
    r = conform(wrong)
    assert r.verdict == "spec" and "torch vs interpreter" in r.reason
