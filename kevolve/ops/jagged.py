"""Jagged tensors in FBGEMM's format: values [T, D] with int64 offsets [B+1], segment b
being rows offsets[b]..offsets[b+1] (possibly empty). A jagged axis walks the absolute rows
of one segment, so nothing is padded unless the op's output is the padded tensor itself."""

from __future__ import annotations

from ..ir.builder import (
    axes,
    cast,
    compute,
    dims,
    exp,
    f32,
    i64,
    input,
    jagged_axis,
    max_,
    maximum,
    op,
    param,
    sum_,
    where,
)
from .base import OpDef


def _jagged_inputs():
    T, B, D = dims("T B D")
    values = input("values", (T, D), f32)
    offsets = input("offsets", (B + 1,), i64)
    return T, B, D, values, offsets


def _segment(offsets, b, name: str, reduce: bool, max_len=None):
    return jagged_axis(name, start=offsets[b], end=offsets[b + 1],
                       max_extent=param("max_len") if max_len is None else max_len,
                       reduce=reduce)


def jagged_reduce_op(mode: str = "sum"):
    """out[b, d] = sum (or mean) of values[l, d] over segment b; empty segments give 0."""
    T, B, D, values, offsets = _jagged_inputs()
    b, d = axes("b d", B, D)
    l = _segment(offsets, b, "l", reduce=True)
    pooled = sum_(values[l, d], over=l)
    if mode == "mean":
        pooled = pooled / cast(maximum(offsets[b + 1] - offsets[b], 1), f32)
    out = compute("out", (b, d), pooled)
    return op(f"jagged_{mode}", inputs=[values, offsets], outputs=[out])


def jagged_softmax_op():
    """Softmax over each segment, per column d; the output is jagged like the input."""
    T, B, D, values, offsets = _jagged_inputs()
    b, d = axes("b d", B, D)
    l = _segment(offsets, b, "l", reduce=False)
    k = _segment(offsets, b, "k", reduce=True)
    mx = compute("mx", (b, d), max_(values[k, d], over=k))
    s = compute("s", (b, d), sum_(exp(values[k, d] - mx[b, d]), over=k))
    y = compute("y", (b, l, d), exp(values[l, d] - mx[b, d]) / s[b, d], shape=(T, D),
                store=(l, d))
    return op("jagged_softmax", inputs=[values, offsets], outputs=[y])


def jagged_softmax_backward_op():
    """d_values[l, d] = y[l, d] * (d_y[l, d] - sum over l's segment of y * d_y): a jagged
    reduction then a jagged pointwise stage; reads the forward output y."""
    T, B, D = dims("T B D")
    y = input("y", (T, D), f32)
    dy = input("d_y", (T, D), f32)
    offsets = input("offsets", (B + 1,), i64)
    b, d = axes("b d", B, D)
    l = _segment(offsets, b, "l", reduce=False)
    k = _segment(offsets, b, "k", reduce=True)
    dot = compute("dot", (b, d), sum_(y[k, d] * dy[k, d], over=k))
    dv = compute("d_values", (b, l, d), y[l, d] * (dy[l, d] - dot[b, d]), shape=(T, D),
                 store=(l, d))
    return op("jagged_softmax_backward", inputs=[y, dy, offsets], outputs=[dv])


def jagged_to_padded_dense_op():
    """out[b, j, d] = values[offsets[b] + j, d] for j < length(b), else 0."""
    T, B, D, values, offsets = _jagged_inputs()
    L = param("max_len")
    b, j, d = axes("b j d", B, L, D)
    inside = j < offsets[b + 1] - offsets[b]
    out = compute("out", (b, j, d), where(inside, values[offsets[b] + j, d], 0.0))
    return op("jagged_to_padded_dense", inputs=[values, offsets], outputs=[out])


def jagged_dense_elementwise_add_op():
    """out = values + dense, at the dense positions the jagged rows occupy; jagged output."""
    T, B, D, values, offsets = _jagged_inputs()
    L = dims("max_len")  # bound from dense's shape
    dense = input("dense", (B, L, D), f32)
    b, d = axes("b d", B, D)
    l = _segment(offsets, b, "l", reduce=False, max_len=L)
    out = compute("out", (b, l, d), values[l, d] + dense[b, l - offsets[b], d],
                  shape=(T, D), store=(l, d))
    return op("jagged_dense_elementwise_add", inputs=[values, offsets, dense], outputs=[out])


def segments(offsets, total: int):
    """(lengths, segment id of each row, position of each row in its segment) in torch,
    without a host sync (output_size is given)."""
    import torch

    lengths = offsets[1:] - offsets[:-1]
    ids = torch.repeat_interleave(torch.arange(lengths.numel(), device=offsets.device),
                                  lengths, output_size=total)
    pos = torch.arange(total, device=offsets.device) - offsets[ids]
    return lengths, ids, pos


def _sum_torch(t, p):
    import torch

    return {"out": torch.segment_reduce(t["values"], "sum", offsets=t["offsets"], axis=0)}


def _mean_torch(t, p):
    import torch

    v, off = t["values"], t["offsets"]
    s = torch.segment_reduce(v, "sum", offsets=off, axis=0)
    n = (off[1:] - off[:-1]).clamp(min=1).to(v.dtype)
    return {"out": s / n[:, None]}


def _softmax_torch(t, p):
    import torch

    v, off = t["values"], t["offsets"]
    _, ids, _ = segments(off, v.shape[0])
    mx = torch.segment_reduce(v, "max", offsets=off, axis=0)
    e = torch.exp(v - mx[ids])
    s = torch.segment_reduce(e, "sum", offsets=off, axis=0)
    return {"y": e / s[ids]}


def _to_padded_torch(t, p):
    v, off = t["values"], t["offsets"]
    _, ids, pos = segments(off, v.shape[0])
    out = v.new_zeros((off.numel() - 1, p["max_len"], v.shape[1]))
    out[ids, pos] = v
    return {"out": out}


def _dense_add_torch(t, p):
    v, off = t["values"], t["offsets"]
    _, ids, pos = segments(off, v.shape[0])
    return {"out": v + t["dense"][ids, pos]}


def _shapes(cpu: dict, gpu: dict) -> dict:
    return {"small": {"B": 7, "D": 4, "max_len": 9, "lengths": "uniform"},
            "cpu": dict(cpu, lengths="uniform"), "gpu": dict(gpu, lengths="uniform")}


_EDGES = (
    {"B": 5, "D": 3, "max_len": 6, "lengths": "all_empty"},
    {"B": 6, "D": 2, "max_len": 40, "lengths": "one_long"},
    {"B": 4, "D": 3, "max_len": 5, "lengths": "full"},
    {"B": 1, "D": 5, "max_len": 8, "lengths": "uniform"},
    {"B": 9, "D": 1, "max_len": 3, "lengths": "uniform"},
)
_SUM_CPU, _SUM_GPU = {"B": 4096, "D": 128, "max_len": 200}, {"B": 16384, "D": 256, "max_len": 200}
_PAD_CPU = {"B": 2048, "D": 64, "max_len": 200}  # the padded tensor dominates CPU time

JAGGED_SUM = OpDef(
    "jagged_sum", jagged_reduce_op("sum"), shapes=_shapes(_SUM_CPU, _SUM_GPU),
    torch_eager=_sum_torch, edge_shapes=_EDGES,
    doc="out[b, d] = sum of values[l, d] over segment b (0 when empty)",
)

JAGGED_MEAN = OpDef(
    "jagged_mean", jagged_reduce_op("mean"), shapes=_shapes(_SUM_CPU, _SUM_GPU),
    torch_eager=_mean_torch, edge_shapes=_EDGES,
    doc="out[b, d] = mean of values[l, d] over segment b (0 when empty)",
)

JAGGED_SOFTMAX = OpDef(
    "jagged_softmax", jagged_softmax_op(),
    shapes=_shapes({"B": 1024, "D": 32, "max_len": 512}, {"B": 4096, "D": 32, "max_len": 512}),
    torch_eager=_softmax_torch, edge_shapes=_EDGES, backward=jagged_softmax_backward_op(),
    doc="y[l, d] = softmax of values[:, d] over l's segment; jagged [T, D] output",
)

JAGGED_TO_PADDED_DENSE = OpDef(
    "jagged_to_padded_dense", jagged_to_padded_dense_op(),
    shapes=_shapes(_PAD_CPU, _SUM_GPU), torch_eager=_to_padded_torch,
    edge_shapes=_EDGES,
    doc="out[b, j, d] = values[offsets[b] + j, d] if j < length(b) else 0; [B, max_len, D]",
)

JAGGED_DENSE_ELEMENTWISE_ADD = OpDef(
    "jagged_dense_elementwise_add", jagged_dense_elementwise_add_op(),
    shapes=_shapes(_PAD_CPU, _SUM_GPU), torch_eager=_dense_add_torch, edge_shapes=_EDGES,
    doc="out[l, d] = values[l, d] + dense[b, l - offsets[b], d]; jagged [T, D] output",
)
