"""kevolve ops as torch custom ops with autograd, on the cpu backend: values and gradients
against eager autograd of the op's reference (fp32 and bf16), fresh random inputs, edge
shapes (empty bags, one bag, size 1), fallbacks, shape buckets, torch.compile(fullgraph)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kevolve.ops import get  # noqa: E402
from kevolve.ops.base import torch_inputs  # noqa: E402
from kevolve.torch import kevolve_op  # noqa: E402
from kevolve.torch.kernels import KernelTable, bound_params, pow2  # noqa: E402

OPS = ["embedding_bag", "embedding_bag_mean", "jagged_sum", "jagged_mean", "jagged_softmax",
       "dot_interaction", "jagged_to_padded_dense"]
TOL = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (2e-2, 2e-2)}


def _shapes(opdef):
    return [opdef.shape("small")] + [dict(e) for e in opdef.edge_shapes]


def _compare(opdef, kop, shape, seed, dtype):
    case = opdef.case(shape, seed=seed)
    base = torch_inputs(opdef.op, case)
    mine, ref = {}, {}
    for n, t in base.items():
        if t.is_floating_point():
            t = t.to(dtype)
            mine[n] = t.clone().requires_grad_(True)
            ref[n] = t.clone().requires_grad_(True)
        else:
            mine[n] = ref[n] = t
    got = kop(*[mine[n] for n in kop.inputs], **case.params)
    want = opdef.torch_eager(ref, case.params)[opdef.op.outputs[0]]
    rtol, atol = TOL[dtype]
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol)
    g = torch.randn(got.shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
    got.backward(g)
    want.backward(g)
    for n in kop.floats:
        assert mine[n].grad is not None, n
        torch.testing.assert_close(mine[n].grad, ref[n].grad, rtol=rtol, atol=atol,
                                   msg=lambda m, n=n: f"{opdef.name} {shape} d_{n}: {m}")


@pytest.mark.parametrize("name", OPS)
def test_values_and_gradients_match_eager_autograd_fp32(name):
    opdef = get(name)
    kop = kevolve_op(opdef, "cpu")
    for k, shape in enumerate(_shapes(opdef)):
        _compare(opdef, kop, shape, seed=11 + k, dtype=torch.float32)
    assert all(v is not None for v in kop.fwd._by_class.values())  # kernels ran, no fallback
    assert all(v is not None for v in kop.bwd._by_class.values())


@pytest.mark.parametrize("name", ["embedding_bag", "jagged_softmax", "dot_interaction"])
def test_values_and_gradients_match_eager_autograd_bf16(name):
    opdef = get(name)
    kop = kevolve_op(opdef, "cpu")
    for k, shape in enumerate(_shapes(opdef)[:3]):
        _compare(opdef, kop, shape, seed=40 + k, dtype=torch.bfloat16)


def test_empty_bags_get_zero_gradient_rows_and_unused_rows_zero():
    opdef = get("embedding_bag")
    kop = kevolve_op(opdef, "cpu")
    table = torch.randn(6, 4, requires_grad=True)
    indices = torch.tensor([2, 2, 5])
    offsets = torch.tensor([0, 0, 2, 2, 3])  # bags: empty, [2, 2], empty, [5]
    out = kop(table, indices, offsets)
    assert torch.equal(out[0], torch.zeros(4)) and torch.equal(out[2], torch.zeros(4))
    g = torch.randn(4, 4)
    out.backward(g)
    want = torch.zeros(6, 4)
    want[2] = 2 * g[1]
    want[5] = g[3]
    torch.testing.assert_close(table.grad, want)


def test_no_kernel_falls_back_to_the_reference():
    opdef = get("jagged_sum")
    kop = kevolve_op(opdef, "cpu", records_fwd=[], records_bwd=[])
    case = opdef.case("small", seed=5)
    t = torch_inputs(opdef.op, case)
    v = t["values"].clone().requires_grad_(True)
    out = kop(v, t["offsets"])
    out.sum().backward()
    assert list(kop.fwd._by_class.values()) == [None]  # nothing built: the reference ran
    want = opdef.torch_eager({"values": t["values"], "offsets": t["offsets"]}, {})["out"]
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(v.grad, torch.ones_like(v))


def test_bounds_are_derived_from_offsets_and_bucketed():
    op = get("jagged_softmax").op
    assert bound_params(op) == {"max_len": "offsets"}
    assert bound_params(get("jagged_to_padded_dense").op) == {}  # max_len sizes the output
    table = KernelTable(op, None, None)
    off = torch.tensor([0, 3, 3, 8])
    assert table.params({"offsets": off}, {}) == {"max_len": 8}
    assert table.params({"offsets": off}, {"max_len": 9}) == {"max_len": 16}
    assert [pow2(n) for n in (0, 1, 2, 3, 5, 64, 65)] == [1, 1, 2, 4, 8, 64, 128]


def test_the_nearest_archived_shape_bucket_is_lowered_first(monkeypatch):
    from kevolve import api

    opdef = get("jagged_sum")
    seen = []
    real = api.lower

    def spy(op, trace, backend, dims):
        seen.append(trace)
        return real(op, None, backend, dims)
    monkeypatch.setattr(api, "lower", spy)
    records = [({"B": 4096, "D": 4, "max_len": 8}, "serving"),
               ({"B": 7, "D": 4, "max_len": 8}, "small")]
    table = KernelTable(opdef.op, api.backend("cpu"), records)
    case = opdef.case("small", seed=1)
    t = torch_inputs(opdef.op, case)
    k, dims = table.kernel(t, table.params(t, dict(case.params)))
    assert k is not None and seen == ["small"]


def test_fullgraph_compile_traces_forward_and_backward():
    opdef = get("embedding_bag")
    kop = kevolve_op(opdef, "cpu")
    case = opdef.case("small", seed=3)
    t = torch_inputs(opdef.op, case)

    def f(table, indices, offsets):
        return (kop(table, indices, offsets) * 2).square().sum()

    a = t["table"].clone().requires_grad_(True)
    b = t["table"].clone().requires_grad_(True)
    y = torch.compile(f, fullgraph=True)(a, t["indices"], t["offsets"])
    y.backward()
    ref = (torch.nn.functional.embedding_bag(t["indices"], b, t["offsets"], mode="sum",
                                             include_last_offset=True) * 2).square().sum()
    ref.backward()
    torch.testing.assert_close(y, ref)
    torch.testing.assert_close(a.grad, b.grad)
    assert np.isfinite(a.grad.numpy()).all()


def test_eager_calls_skip_the_dispatcher_and_remember_each_shape(monkeypatch):
    opdef = get("jagged_sum")
    kop = kevolve_op(opdef, "cpu")

    def no_dispatch(*a):
        raise AssertionError("an eager call went through the custom op")
    monkeypatch.setattr(kop, "forward_op", no_dispatch)
    # kevolve_op is shared per (op, backend): start from empty caches whatever ran before
    monkeypatch.setattr(kop.fwd, "_by_shape", {})
    monkeypatch.setattr(kop.fwd, "_by_class", {})
    g = torch.Generator().manual_seed(5)
    for lengths in ([3, 0, 5], [2, 7, 1], [3, 0, 5]):  # totals 8, 10, 8: one shape class
        off = torch.tensor([0] + lengths).cumsum(0)
        v = torch.randn(int(off[-1]), 6, generator=g, requires_grad=True)
        out = kop(v, off, max_len=8)
        want = torch.stack([v[a:b].sum(0) for a, b in zip(off[:-1], off[1:], strict=True)])
        torch.testing.assert_close(out, want)
        out.square().sum().backward()
        torch.testing.assert_close(v.grad, 2 * want.detach().repeat_interleave(
            torch.tensor(lengths), dim=0))
    assert len(kop.fwd._by_shape) == 2 and len(kop.fwd._by_class) == 1
