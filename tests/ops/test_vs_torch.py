"""Every op's IR (run by the numpy interpreter) agrees with the torch eager code a user would
write, on the small preset and every edge shape, several seeds: in float64 (tight: the two
differ only by summation order) and in the op's own dtypes (tolerance by dtype)."""

import numpy as np
import pytest
import torch

from kevolve import ops
from kevolve.ir import interp
from kevolve.ops.base import torch_inputs

SEEDS = (0, 1, 2)
# Interpreter (float64, unrounded) vs torch computing in the op's dtype.
TOL = {"f32": dict(rtol=1e-5, atol=1e-5), "f16": dict(rtol=4e-3, atol=4e-3),
       "bf16": dict(rtol=2e-2, atol=2e-2)}


def cases():
    return [pytest.param(name, sd, id=f"{name}-{'small' if k == 0 else f'edge{k}'}")
            for name, d in ops.LIBRARY.items()
            for k, sd in enumerate((d.shapes["small"],) + d.edge_shapes)]


def assert_random(case):
    for name, a in case.inputs.items():
        if a.dtype.kind == "f" and a.size:
            assert np.any(a != 0), f"{name} is all zeros"
            assert a.size == 1 or np.unique(a).size > 1, f"{name} is constant"


def compare(got: dict, want: dict, **tol):
    assert set(got) == set(want)
    for k, g in got.items():
        w = want[k].detach().cpu().to(torch.float64).numpy()
        assert g.shape == w.shape, f"{k}: shape {g.shape} vs torch {w.shape}"
        assert not np.isnan(g).any(), f"{k}: interpreter left elements unwritten"
        np.testing.assert_allclose(g, w, err_msg=k, **tol)


@pytest.mark.parametrize("name, sd", cases())
def test_interp_matches_torch_float64(name, sd):
    d = ops.get(name)
    o = d.op_for(sd)
    for seed in SEEDS:
        c = d.case(sd, seed)
        assert_random(c)
        got = interp.run(o, c.inputs, c.params)
        want = d.torch_eager(torch_inputs(o, c, float_dtype=torch.float64), c.params)
        compare(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name, sd", cases())
def test_interp_matches_torch_in_op_dtype(name, sd):
    d = ops.get(name)
    o = d.op_for(sd)
    c = d.case(sd, seed=7)
    want = d.torch_eager(torch_inputs(o, c), c.params)
    dt = o.output_buffers[0].dtype.name
    for k, t in want.items():
        assert str(t.dtype) == {"f32": "torch.float32", "bf16": "torch.bfloat16",
                                "f16": "torch.float16"}[dt], f"{k} comes back as {t.dtype}"
    compare(interp.run(o, c.inputs, c.params), want, **TOL[dt])


@pytest.mark.parametrize("name", ops.names())
def test_small_outputs_are_not_trivial(name):
    """A comparison of zeros with zeros would pass for a wrong op: the small preset's
    outputs must carry values (padding aside)."""
    d = ops.get(name)
    c = d.case("small", seed=3)
    for k, v in interp.run(d.op_for("small"), c.inputs, c.params).items():
        assert np.count_nonzero(v) > v.size // 4, k


@pytest.mark.parametrize("name", ops.names())
def test_inputs_are_fresh_per_seed(name):
    d = ops.get(name)
    a, b, a2 = d.case("small", 0), d.case("small", 1), d.case("small", 0)
    floats = [k for k, v in a.inputs.items() if v.dtype.kind == "f"]
    assert floats
    assert all(np.array_equal(a.inputs[k], a2.inputs[k]) for k in a.inputs)
    assert any(not np.array_equal(a.inputs[k], b.inputs[k]) for k in floats)


def test_bf16_inputs_are_bf16_values():
    c = ops.get("gemm_bias_gelu").case("small")
    for a in c.inputs.values():
        assert a.dtype == np.float32
        assert not (a.view(np.uint32) & 0xFFFF).any()
