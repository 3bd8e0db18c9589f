"""Pooling 1d/2d/3d: max and average over a window (kernel = stride = 2, or kernel 3 stride 1
padding 1 with a guarded read: -inf / 0 outside), and adaptive pooling, whose window bounds
follow the output index (floor(o L / Lo) .. ceil((o + 1) L / Lo)): a dependent axis."""

from __future__ import annotations

from ...ir.builder import (
    axes,
    axis,
    compute,
    const,
    dims,
    f32,
    input,
    max_,
    op,
    reduce_axis,
    sum_,
    where,
)
from ..spec import derived_presets
from ._entry import at_least, entry

_SP = {1: "L", 2: "H W", 3: "D H W"}


def pool_op(name, kind, nd, k=2, stride=2, pad=0):
    B, C = dims("B C")
    S = dims(_SP[nd])
    S = S if isinstance(S, tuple) else (S,)
    So = tuple((s + 2 * pad - k) // stride + 1 for s in S)
    x = input("x", (B, C, *S), f32)
    low = _SP[nd].lower().split()
    b, c = axes("b c", B, C)
    so = axes(" ".join("o" + n for n in low), *So)
    kk = tuple(reduce_axis("k" + n, k) for n in low)
    idx = tuple(o * stride + t - pad for o, t in zip(so, kk))
    v = x[(b, c, *idx)]
    if pad:
        inside = None
        for e, n in zip(idx, S):
            cnd = (e >= 0) & (e < n)
            inside = cnd if inside is None else inside & cnd
        v = where(inside, v, const(float("-inf"), f32) if kind == "max" else 0.0)
    body = max_(v, over=kk) if kind == "max" else sum_(v, over=kk) / float(k ** nd)
    return op(name, inputs=[x], outputs=[compute("y", (b, c, *so), body)])


def adaptive_op(name, kind, nd):
    B, C = dims("B C")
    S = dims(_SP[nd])
    S = S if isinstance(S, tuple) else (S,)
    Os = dims(" ".join(n + "o" for n in _SP[nd].split()))
    Os = Os if isinstance(Os, tuple) else (Os,)
    x = input("x", (B, C, *S), f32)
    low = _SP[nd].lower().split()
    b, c = axes("b c", B, C)
    so = axes(" ".join("o" + n for n in low), *Os)
    ks, cnt = [], None
    for o, s, n, nm in zip(so, S, Os, low):
        start = (o * s) // n
        end = ((o + 1) * s + n - 1) // n
        ks.append(axis("k" + nm, end - start, start=start, max_extent=s // n + 2, reduce=True))
        e = end - start
        cnt = e if cnt is None else cnt * e
    v = x[(b, c, *ks)]
    body = max_(v, over=tuple(ks)) if kind == "max" else sum_(v, over=tuple(ks)) / cnt
    return op(name, inputs=[x], outputs=[compute("y", (b, c, *so), body, dtype=f32)])


def _ref(kind, nd, k=2, stride=2, pad=0, adaptive=False):
    def ref(t, p):
        import torch.nn.functional as F

        x = t["x"]
        if adaptive:
            size = tuple(p[n + "o"] for n in _SP[nd].split())
            return getattr(F, f"adaptive_{kind}_pool{nd}d")(x, size)
        fn = getattr(F, f"{kind}_pool{nd}d")
        return fn(x, k, stride, pad)
    ref.__qualname__ = f"F.{'adaptive_' if adaptive else ''}{kind}_pool{nd}d"
    return ref


def _make(name, kind, nd, k=2, stride=2, pad=0):
    o = pool_op(name, kind, nd, k, stride, pad)
    mins = {s: k - 2 * pad for s in _SP[nd].split()}
    small = {kk: (max(v, mins[kk]) if kk in mins else v)
             for kk, v in derived_presets(o)["small"].items()}
    return entry(o, _ref(kind, nd, k, stride, pad), edges=at_least(o, mins),
                 presets={"small": small})


OPS = {}
for _kind in ("max", "avg"):
    for _nd in (1, 2, 3):
        _n = f"{_kind}_pool{_nd}d"
        OPS[_n] = _make(_n, _kind, _nd)
    _n = f"{_kind}_pool2d_padded"
    OPS[_n] = _make(_n, _kind, 2, k=3, stride=1, pad=1)
    for _nd in (1, 2):
        _n = f"adaptive_{_kind}_pool{_nd}d"
        _o = adaptive_op(_n, _kind, _nd)
        OPS[_n] = entry(_o, _ref(_kind, _nd, adaptive=True), edges=at_least(_o, {}))
