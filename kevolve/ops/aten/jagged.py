"""The FBGEMM jagged family over values[T, D] split by offsets[B + 1]: the library's jagged
ops (sum, mean, softmax, to_padded_dense, dense elementwise add) under their catalog names,
plus segment max, a jagged x dense elementwise multiply, and the
two jagged matmuls (jagged x dense per segment; jagged^T x jagged, a per-segment outer
product sum). References are vectorized torch (segment ids and positions of each row)."""

from __future__ import annotations

from dataclasses import replace

from ...ir.builder import (
    axes,
    compute,
    dims,
    f32,
    i64,
    input,
    jagged_axis,
    max_,
    op,
    param,
    reduce_axis,
    sum_,
)
from .. import jagged as lib
from ._entry import PREFIX, entry


def _inputs():
    T, B, D = dims("T B D")
    return T, B, D, input("values", (T, D), f32), input("offsets", (B + 1,), i64)


def _seg(offsets, b, name, reduce, max_len=None):
    return jagged_axis(name, start=offsets[b], end=offsets[b + 1],
                       max_extent=param("max_len") if max_len is None else max_len,
                       reduce=reduce)


def _ops():
    out = []
    T, B, D, values, offsets = _inputs()
    b, d = axes("b d", B, D)
    k = _seg(offsets, b, "l", True)
    out.append((op("jagged_max", inputs=[values, offsets], outputs=[compute(
        "out", (b, d), max_(values[k, d], over=k))]), _max_ref))
    L = dims("max_len")
    dense = input("dense", (B, L, D), f32)
    lj = _seg(offsets, b, "l", False, L)
    out.append((op("jagged_dense_elementwise_mul", inputs=[values, offsets, dense], outputs=[
        compute("out", (b, lj, d), values[lj, d] * dense[b, lj - offsets[b], d], shape=(T, D),
                store=(lj, d))]), _mul_ref))
    N = dims("N")
    W = input("weight", (B, D, N), f32)
    b2, n2 = axes("b n", B, N)
    l2 = _seg(offsets, b2, "l", False)
    r = reduce_axis("r", D)
    out.append((op("jagged_dense_bmm", inputs=[values, offsets, W], outputs=[compute(
        "out", (b2, l2, n2), sum_(values[l2, r] * W[b2, r, n2], over=r), shape=(T, N),
        store=(l2, n2))]), _jd_bmm_ref))
    Y = input("y", (T, N), f32)
    b3, d3, n3 = axes("b d n", B, D, N)
    l3 = _seg(offsets, b3, "l", True)
    out.append((op("jagged_jagged_bmm", inputs=[values, Y, offsets], outputs=[compute(
        "out", (b3, d3, n3), sum_(values[l3, d3] * Y[l3, n3], over=l3))]), _jj_bmm_ref))
    return out


def _max_ref(t, p):
    import torch

    v, off = t["values"], t["offsets"]
    lengths, ids, _ = lib.segments(off, v.shape[0])
    out = torch.full((lengths.numel(), v.shape[1]), -torch.inf, dtype=v.dtype,
                     device=v.device)
    out = out.scatter_reduce(0, ids[:, None].expand_as(v), v, "amax")
    return torch.where(lengths[:, None] > 0, out, torch.zeros_like(out))


def _mul_ref(t, p):
    v, off = t["values"], t["offsets"]
    _, ids, pos = lib.segments(off, v.shape[0])
    return v * t["dense"][ids, pos]


def _jd_bmm_ref(t, p):
    import torch

    v, off = t["values"], t["offsets"]
    _, ids, _ = lib.segments(off, v.shape[0])
    return torch.bmm(v[:, None, :], t["weight"][ids]).squeeze(1)


def _jj_bmm_ref(t, p):
    import torch

    v, y, off = t["values"], t["y"], t["offsets"]
    _, ids, _ = lib.segments(off, v.shape[0])
    outer = v[:, :, None] * y[:, None, :]
    out = torch.zeros((off.numel() - 1, v.shape[1], y.shape[1]), dtype=v.dtype,
                      device=v.device)
    return out.index_add(0, ids, outer)


OPS = {d.name: replace(d, name=PREFIX + d.name, ref="") for d in (
    lib.JAGGED_SUM, lib.JAGGED_MEAN, lib.JAGGED_SOFTMAX, lib.JAGGED_TO_PADDED_DENSE,
    lib.JAGGED_DENSE_ELEMENTWISE_ADD)}
for _o, _ref in _ops():
    OPS[_o.name] = entry(_o, _ref)
