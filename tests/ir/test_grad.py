"""Backward ops (derived from the IR, or hand-written) against torch autograd of the ops'
references, run by the reference interpreter on fresh random inputs and edge shapes."""

from __future__ import annotations

import numpy as np
import pytest

from kevolve.ir import grad
from kevolve.ir.interp import bind_dims, run
from kevolve.ops import get
from kevolve.ops.base import torch_inputs

torch = pytest.importorskip("torch")

DIFFERENTIABLE = ["embedding_bag", "embedding_bag_mean", "jagged_sum", "jagged_mean",
                  "jagged_to_padded_dense", "gemm", "swish_add", "dot_interaction",
                  "jagged_softmax"]


def _grads_torch(opdef, case, dout):
    t = torch_inputs(opdef.op, case, float_dtype=torch.float64)
    for b in opdef.op.inputs:
        if b.dtype.is_float:
            t[b.name].requires_grad_(True)
    out = opdef.torch_eager(t, case.params)
    loss = sum((out[n] * torch.from_numpy(dout[n])).sum() for n in opdef.op.outputs)
    loss.backward()
    return {n: t[n].grad.numpy() for n in t if t[n].grad is not None}, \
        {n: out[n].detach().numpy() for n in opdef.op.outputs}


def _grads_ir(opdef, case, dout, outs):
    bwd = grad.for_op(opdef.op, opdef.backward)
    aux, aparams = grad.aux_arrays(bwd, case.inputs,
                                   bind_dims(opdef.op, case.inputs, case.params))
    ins = dict(case.inputs) | outs | {"d_" + k: v for k, v in dout.items()} | aux
    ins = {b.name: ins[b.name] for b in bwd.op.inputs}
    got = run(bwd.op, ins, dict(case.params) | aparams)
    return bwd, {n: got["d_" + n] for n in bwd.wrt}


def _shapes(opdef):
    return [opdef.shape("small")] + [dict(e) for e in opdef.edge_shapes]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_backward_matches_autograd(name):
    opdef = get(name)
    for k, shape in enumerate(_shapes(opdef)):
        for seed in (k, 100 + k):
            case = opdef.case(shape, seed=seed)
            rng = np.random.default_rng(seed + 7)
            outs_shape = {n: run(opdef.op, case.inputs, case.params)[n].shape
                          for n in opdef.op.outputs}
            dout = {n: rng.standard_normal(s) for n, s in outs_shape.items()}
            want, outs = _grads_torch(opdef, case, dout)
            bwd, got = _grads_ir(opdef, case, dout, outs)
            assert set(got) == {b.name for b in opdef.op.inputs if b.dtype.is_float}
            for n in got:
                assert got[n].shape == want[n].shape, (name, shape, n)
                np.testing.assert_allclose(got[n], want[n], rtol=1e-9, atol=1e-9,
                                           err_msg=f"{name} {shape} d_{n}")


def test_jagged_to_padded_dense_backward_ignores_rows_past_max_len():
    opdef = get("jagged_to_padded_dense")
    shape = {"B": 5, "D": 3, "max_len": 4, "lengths": "one_long"}
    case = opdef.case(shape, seed=2)
    lengths = np.diff(case.inputs["offsets"])
    lengths[0] = lengths[0] + 6  # segment 0 runs past max_len: its tail is dropped
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    values = np.random.default_rng(0).standard_normal((int(offsets[-1]), 3))
    ins = {"values": values, "offsets": offsets}
    params = dict(case.params)
    bwd = grad.derive(opdef.op)
    dims = bind_dims(opdef.op, ins, params)
    aux, ap = grad.aux_arrays(bwd, ins, dims)
    dout = np.random.default_rng(1).standard_normal((5, params["max_len"], 3))
    got = run(bwd.op, {"offsets": offsets, "d_out": dout} | aux, params | ap)["d_values"]
    want = np.zeros_like(values)
    for b in range(5):
        for j in range(min(lengths[b], params["max_len"])):
            want[offsets[b] + j] = dout[b, j]
    np.testing.assert_allclose(got, want)


def test_embedding_bag_weight_grad_is_a_jagged_reduction_over_the_inverse_index():
    bwd = grad.derive(get("embedding_bag").op, gathers="inverse")
    (stage,) = bwd.op.stages
    (axis,) = stage.reduce_axes
    assert axis.is_jagged and axis.name == "g_indices"
    assert set(bwd.aux) == {"perm__indices", "invoff__indices", "seg__offsets"}


def test_embedding_bag_weight_grad_is_an_accumulating_stage_by_default():
    """d_table[indices[l], d] += d_out[b, d] over the forward's points: no auxiliary input,
    no max_count parameter (a bound on the busiest row)."""
    bwd = grad.derive(get("embedding_bag").op)
    (stage,) = bwd.op.stages
    assert stage.accumulate == "sum" and not stage.reduce_axes
    assert [a.name for a in stage.axes] == ["b", "d", "l"] and stage.axes[2].is_jagged
    assert bwd.aux == () and not any(p.name.startswith(grad.MAXCOUNT) for p in bwd.op.params)


@pytest.mark.parametrize("name", ["embedding_bag", "embedding_bag_mean"])
def test_the_inverse_index_form_matches_autograd_too(name):
    opdef = get(name)
    for k, shape in enumerate(_shapes(opdef)):
        case = opdef.case(shape, seed=k)
        dout = {n: np.random.default_rng(k).standard_normal(v.shape)
                for n, v in run(opdef.op, case.inputs, case.params).items()}
        want, outs = _grads_torch(opdef, case, dout)
        bwd = grad.derive(opdef.op, gathers="inverse")
        aux, ap = grad.aux_arrays(bwd, case.inputs, bind_dims(opdef.op, case.inputs,
                                                              case.params))
        ins = dict(case.inputs) | {"d_" + n: v for n, v in dout.items()} | aux
        got = run(bwd.op, {b.name: ins[b.name] for b in bwd.op.inputs}, case.params | ap)
        for n in bwd.wrt:
            np.testing.assert_allclose(got["d_" + n], want[n], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", ["softmax", "layernorm", "gemm_bias_gelu"])
def test_multi_stage_ops_ask_for_a_hand_written_backward(name):
    with pytest.raises(grad.NotDifferentiable, match="OpDef.backward"):
        grad.derive(get(name).op)


def test_hand_written_backward_is_used_as_given():
    opdef = get("jagged_softmax")
    bwd = grad.for_op(opdef.op, opdef.backward)
    assert bwd.op is opdef.backward and bwd.wrt == ("values",)


def test_derivative_rules_match_finite_differences():
    from kevolve.ir.builder import (
        axes,
        compute,
        dims,
        erf,
        exp,
        f32,
        input,
        log,
        op,
        rsqrt,
        sigmoid,
        sqrt,
        tanh,
        where,
    )
    n = dims("n")
    x = input("x", (n,), f32)
    (i,) = axes("i", n)
    v = x[i]
    body = (tanh(v) * sigmoid(v) + erf(v) * exp(v * 0.3) + log(v * v + 1.0)
            + sqrt(v * v + 2.0) / rsqrt(v * v + 3.0) + where(v > 0.1, v * v, -v) + v ** 3.0)
    o = op("f", inputs=[x], outputs=[compute("y", (i,), body)])
    bwd = grad.derive(o)
    xs = np.random.default_rng(3).uniform(-2, 2, 31)
    xs = xs[np.abs(xs - 0.1) > 1e-3]
    got = run(bwd.op, {"x": xs, "d_y": np.ones_like(xs)})["d_x"]
    h = 1e-6
    fd = (run(o, {"x": xs + h})["y"] - run(o, {"x": xs - h})["y"]) / (2 * h)
    np.testing.assert_allclose(got, fd, rtol=1e-5, atol=1e-6)
