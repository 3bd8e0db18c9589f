"""Jagged ops in FBGEMM's format: values [T, D], offsets [B + 1] (int64), segment b being
rows offsets[b]..offsets[b + 1] (possibly empty). A jagged axis walks absolute rows."""

from kevolve.ir.builder import (
    axes,
    cast,
    compute,
    dims,
    exp,
    f32,
    i64,
    input,
    jagged_axis,
    log,
    max_,
    maximum,
    op,
    param,
    reduce_axis,
    sqrt,
    sum_,
)
from kevolve.ops import define, lengths

SEGS = {"small": {"B": 7, "D": 5, "max_len": 6},
        "cpu": {"B": 2048, "D": 64, "max_len": 128},
        "gpu": {"B": 32768, "D": 256, "max_len": 256}}


def _segments(offsets, total):
    """Segment id of each row, in torch, without a host sync."""
    import torch

    n = offsets[1:] - offsets[:-1]
    return torch.repeat_interleave(torch.arange(n.numel(), device=offsets.device), n,
                                   output_size=total)


def _inputs():
    T, B, D = dims("T B D")
    return B, D, input("values", (T, D), f32), input("offsets", (B + 1,), i64)


def _seg(offsets, b, name, reduce):
    return jagged_axis(name, start=offsets[b], end=offsets[b + 1],
                       max_extent=param("max_len"), reduce=reduce)


# -- segment max ----------------------------------------------------------------------------
B, D, values, offsets = _inputs()
b, d = axes("b d", B, D)
k = _seg(offsets, b, "k", True)
out = compute("out", (b, d), max_(values[k, d], over=k))


def _segment_max(t, _):

    v, off = t["values"], t["offsets"]
    out = v.new_zeros((off.numel() - 1, v.shape[1]))
    ids = _segments(off, v.shape[0])[:, None].expand(-1, v.shape[1])
    return out.scatter_reduce(0, ids, v, "amax", include_self=False) if v.numel() else out


SEGMENT_MAX = define(op("segment_max", inputs=[values, offsets], outputs=[out]),
                     presets=SEGS, reference=_segment_max,
                     inputs={"offsets": lengths("skewed")},
                     doc="out[b, d] = max over segment b of values[:, d] (0 if empty)")

# -- L2 norm of each segment's column ------------------------------------------------------
B, D, values, offsets = _inputs()
b, d = axes("b d", B, D)
k = _seg(offsets, b, "k", True)
out = compute("out", (b, d), sqrt(sum_(values[k, d] * values[k, d], over=k)))


def _segment_l2(t, _):
    import torch

    v = t["values"]
    return torch.segment_reduce(v * v, "sum", offsets=t["offsets"], axis=0).sqrt()


SEGMENT_L2 = define(op("segment_l2", inputs=[values, offsets], outputs=[out]),
                    presets=SEGS, reference=_segment_l2,
                    doc="out[b, d] = ||values[segment b, d]||_2")

# -- logsumexp of each segment (0 for an empty one) -----------------------------------------
B, D, values, offsets = _inputs()
b, d = axes("b d", B, D)
k = _seg(offsets, b, "k", True)
mx = compute("mx", (b, d), max_(values[k, d], over=k))
n = offsets[b + 1] - offsets[b]
s = compute("s", (b, d), sum_(exp(values[k, d] - mx[b, d]), over=k))
out = compute("out", (b, d), mx[b, d] + log(maximum(s[b, d], 1.0)))
# an empty segment: s = 0 (a sum over nothing), so log(max(0, 1)) = 0 and out = mx = 0;
# a non-empty one has s >= 1 (its maximum contributes exp(0)), so the max is a no-op.


def _segment_logsumexp(t, _):
    import torch

    v, off = t["values"], t["offsets"]
    ids = _segments(off, v.shape[0])
    mx = torch.segment_reduce(v, "max", offsets=off, axis=0)  # -inf where empty
    nz = (off[1:] - off[:-1] > 0)[:, None]
    mx = torch.where(nz, mx, torch.zeros_like(mx))
    s = torch.segment_reduce((v - mx[ids]).exp(), "sum", offsets=off, axis=0)
    return mx + s.clamp(min=1.0).log()


SEGMENT_LOGSUMEXP = define(op("segment_logsumexp", inputs=[values, offsets], outputs=[out]),
                           presets=SEGS, reference=_segment_logsumexp,
                           doc="out[b, d] = logsumexp over segment b (0 if empty)")

# -- scale each segment's rows by a per-segment factor (a jagged output) -------------------
B, D, values, offsets = _inputs()
T = dims("T")
scale = input("scale", (B,), f32)
b, d = axes("b d", B, D)
l = _seg(offsets, b, "l", False)
out = compute("out", (b, l, d), values[l, d] * scale[b], shape=(T, D), store=(l, d))


def _jagged_scale(t, _):
    v = t["values"]
    return v * t["scale"][_segments(t["offsets"], v.shape[0])][:, None]


JAGGED_SCALE = define(op("jagged_scale", inputs=[values, offsets, scale], outputs=[out]),
                      presets=SEGS, reference=_jagged_scale,
                      doc="out[l, :] = values[l, :] * scale[segment of l]")

# -- centre each segment: subtract its mean (a jagged output read after a jagged reduction) --
B, D, values, offsets = _inputs()
T = dims("T")
b, d = axes("b d", B, D)
k = _seg(offsets, b, "k", True)
l = _seg(offsets, b, "l", False)
mean = compute("mean", (b, d), sum_(values[k, d], over=k)
               / cast(maximum(offsets[b + 1] - offsets[b], 1), f32))
out = compute("out", (b, l, d), values[l, d] - mean[b, d], shape=(T, D), store=(l, d))


def _jagged_center(t, _):
    import torch

    v, off = t["values"], t["offsets"]
    s = torch.segment_reduce(v, "sum", offsets=off, axis=0)
    mean = s / (off[1:] - off[:-1]).clamp(min=1).to(v.dtype)[:, None]
    return v - mean[_segments(off, v.shape[0])]


JAGGED_CENTER = define(op("jagged_center", inputs=[values, offsets], outputs=[out]),
                       presets=SEGS, reference=_jagged_center,
                       doc="out[l, :] = values[l, :] - mean of l's segment")

# -- jagged x dense batched matmul: each segment's rows times its own matrix ---------------
T, B, K, N = dims("T B K N")
values = input("values", (T, K), f32)
offsets = input("offsets", (B + 1,), i64)
w = input("w", (B, K, N), f32)
b, j = axes("b j", B, N)
l = _seg(offsets, b, "l", False)
kk = reduce_axis("kk", K)
out = compute("out", (b, l, j), sum_(values[l, kk] * w[b, kk, j], over=kk), shape=(T, N),
              store=(l, j))


def _jagged_bmm(t, _):
    import torch

    v = t["values"]
    ids = _segments(t["offsets"], v.shape[0])
    return torch.bmm(v[:, None, :], t["w"][ids]).squeeze(1)


JAGGED_DENSE_BMM = define(
    op("jagged_dense_bmm", inputs=[values, offsets, w], outputs=[out]),
    presets={"small": {"B": 5, "K": 6, "N": 7, "max_len": 5},
             "cpu": {"B": 256, "K": 64, "N": 64, "max_len": 64},
             "gpu": {"B": 2048, "K": 128, "N": 128, "max_len": 256}},
    reference=_jagged_bmm, doc="out[l, :] = values[l, :] @ w[segment of l]")
