"""softmax, log_softmax and softmin along the last dim of x[M, N], the first, and the middle
dim of x[A, B, C]: a max stage, a sum of exponentials, a pointwise stage."""

from __future__ import annotations

from ...ir.builder import axes, compute, dims, exp, f32, input, log, max_, op, reduce_axis, sum_
from ._entry import at_least, entry

MODES = {"last": ("M N", 1, -1), "first": ("M N", 0, 0), "middle": ("A B C", 1, 1)}


def softmax_op(kind: str, mode: str):
    names, p, _ = MODES[mode]
    ds = dims(names)
    x = input("x", ds, f32)
    sp = axes(" ".join("ijl"[: len(ds)]), *ds)
    keep = tuple(a for q, a in enumerate(sp) if q != p)
    k = reduce_axis("k", ds[p])
    red = tuple(k if q == p else a for q, a in enumerate(sp))
    sign = -1.0 if kind == "softmin" else 1.0
    mx = compute("mx", keep, max_(x[red] * sign, over=k))
    s = compute("s", keep, sum_(exp(x[red] * sign - mx[keep]), over=k))
    z = x[sp] * sign - mx[keep]
    y = compute("y", sp, z - log(s[keep]) if kind == "log_softmax" else exp(z) / s[keep])
    return op(f"{kind}_{mode}", inputs=[x], outputs=[y])


def _ref(kind: str, dim: int):
    def ref(t, p):
        import torch.nn.functional as F

        return getattr(F, kind)(t["x"], dim=dim)
    ref.__qualname__ = f"F.{kind}(dim={dim})"
    return ref


def _make(kind, mode):
    o = softmax_op(kind, mode)
    return entry(o, _ref(kind, MODES[mode][2]), edges=at_least(o, {}),
                 doc=f"F.{kind} along dim {MODES[mode][2]}")


OPS = {f"{k}_{m}": _make(k, m) for k in ("softmax", "log_softmax", "softmin")
       for m in MODES}
