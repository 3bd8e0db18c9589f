"""Convolutions 1d/2d/3d from one builder: stride, padding (a guarded read: where the tap
falls outside the input it reads 0), dilation, bias, and the channel structure: standard,
depthwise (groups = channels), grouped (x as [B, G, C/G, *S], torch's [B, C, *S] viewed by
group) and transposed. Kernel sizes are constants of the spec, as in a model's layer."""

from __future__ import annotations

from ...ir.builder import axes, compute, dims, f32, input, op, reduce_axis, sum_, where
from ..spec import derived_presets
from ._entry import at_least, entry

_SP = {1: "L", 2: "H W", 3: "D H W"}


def _inside(idx, ds):
    cond = None
    for e, n in zip(idx, ds):
        c = (e >= 0) & (e < n)
        cond = c if cond is None else cond & c
    return cond


def conv_op(name, nd, k=3, stride=1, pad=0, dil=1, groups="standard", bias=False):
    B, C, O = dims("B C O")
    S = dims(_SP[nd])
    S = S if isinstance(S, tuple) else (S,)
    So = tuple((s + 2 * pad - dil * (k - 1) - 1) // stride + 1 for s in S)
    (b,) = axes("b", B)
    so = axes(" ".join("o" + n for n in _SP[nd].lower().split()), *So)
    kk = tuple(reduce_axis("k" + n, k) for n in _SP[nd].lower().split())
    idx = tuple(o * stride + t * dil - pad for o, t in zip(so, kk))
    if groups == "grouped":
        G = dims("G")
        x = input("x", (B, G, C, *S), f32)
        w = input("weight", (G, O, C, *(k,) * nd), f32)
        g, oc = axes("g oc", G, O)
        c = reduce_axis("c", C)
        xv = x[(b, g, c, *idx)]
        body = sum_((where(_inside(idx, S), xv, 0.0) if pad else xv) * w[(g, oc, c, *kk)],
                    over=(c, *kk))
        ins, out_axes = [x, w], (b, g, oc, *so)
    elif groups == "depthwise":
        x = input("x", (B, C, *S), f32)
        w = input("weight", (C, 1, *(k,) * nd), f32)
        (ch,) = axes("ch", C)
        xv = x[(b, ch, *idx)]
        body = sum_((where(_inside(idx, S), xv, 0.0) if pad else xv) * w[(ch, 0, *kk)],
                    over=kk)
        ins, out_axes = [x, w], (b, ch, *so)
    else:
        x = input("x", (B, C, *S), f32)
        w = input("weight", (O, C, *(k,) * nd), f32)
        (oc,) = axes("oc", O)
        c = reduce_axis("c", C)
        xv = x[(b, c, *idx)]
        body = sum_((where(_inside(idx, S), xv, 0.0) if pad else xv) * w[(oc, c, *kk)],
                    over=(c, *kk))
        ins, out_axes = [x, w], (b, oc, *so)
    if bias:
        bb = input("bias", (O,), f32)
        body = body + bb[out_axes[1]]
        ins.append(bb)
    return op(name, inputs=ins, outputs=[compute("y", out_axes, body)])


def conv_transpose_op(name, k=3, stride=1):
    """y[b, o, l] = sum_{c, t} x[b, c, (l - t) / stride] * w[c, o, t] where that is a whole
    index inside x (torch's conv_transpose1d, padding 0)."""
    B, C, O, L = dims("B C O L")
    x = input("x", (B, C, L), f32)
    w = input("weight", (C, O, k), f32)
    b, oc, ol = axes("b oc ol", B, O, (L - 1) * stride + k)
    c, t = reduce_axis("c", C), reduce_axis("t", k)
    d = ol - t
    ok = (d >= 0) & ((d // stride) < L)
    if stride > 1:
        from ...ir.builder import eq
        ok = ok & eq(d % stride, 0)
    body = sum_(where(ok, x[b, c, d // stride], 0.0) * w[c, oc, t], over=(c, t))
    return op(name, inputs=[x, w], outputs=[compute("y", (b, oc, ol), body)])


def _ref(nd, stride, pad, dil, groups, transposed=False):
    def ref(t, p):
        import torch.nn.functional as F

        x, w = t["x"], t["weight"]
        if transposed:
            return F.conv_transpose1d(x, w, stride=stride)
        if groups == "grouped":
            B, G, C = x.shape[:3]
            fn = getattr(F, f"conv{nd}d")
            y = fn(x.reshape(B, G * C, *x.shape[3:]), w.reshape(-1, *w.shape[2:]),
                   stride=stride, padding=pad, dilation=dil, groups=G)
            return y.reshape(B, G, w.shape[1], *y.shape[2:])
        g = x.shape[1] if groups == "depthwise" else 1
        return getattr(F, f"conv{nd}d")(x, w, t.get("bias"), stride=stride, padding=pad,
                                       dilation=dil, groups=g)
    ref.__qualname__ = f"F.conv{nd}d"
    return ref


def _make(name, nd, k=3, stride=1, pad=0, dil=1, groups="standard", bias=False):
    o = conv_op(name, nd, k, stride, pad, dil, groups, bias)
    need = dil * (k - 1) + 1 - 2 * pad
    mins = {s: need for s in _SP[nd].split()}
    small = {kk: (max(v, mins[kk]) if kk in mins else v)
             for kk, v in derived_presets(o)["small"].items()}
    return entry(o, _ref(nd, stride, pad, dil, groups), edges=at_least(o, mins),
                 presets={"small": small}, doc=f"F.conv{nd}d {name}")


_TABLE = {
    "conv1d": dict(nd=1), "conv1d_bias": dict(nd=1, bias=True),
    "conv1d_padded": dict(nd=1, pad=1), "conv1d_strided": dict(nd=1, stride=2),
    "conv1d_dilated": dict(nd=1, dil=2), "conv1d_depthwise": dict(nd=1, groups="depthwise"),
    "conv1d_grouped": dict(nd=1, groups="grouped"),
    "conv2d": dict(nd=2), "conv2d_bias": dict(nd=2, bias=True),
    "conv2d_padded": dict(nd=2, pad=1), "conv2d_strided": dict(nd=2, stride=2, pad=1),
    "conv2d_dilated": dict(nd=2, dil=2), "conv2d_depthwise": dict(nd=2, groups="depthwise",
                                                                pad=1),
    "conv2d_grouped": dict(nd=2, groups="grouped"), "conv2d_1x1": dict(nd=2, k=1),
    "conv3d": dict(nd=3, k=2), "conv3d_padded": dict(nd=3, pad=1),
}
OPS = {n: _make(n, **kw) for n, kw in _TABLE.items()}
for _n, _s in (("conv_transpose1d", 1), ("conv_transpose1d_strided", 2)):
    _o = conv_transpose_op(_n, 3, _s)
    OPS[_n] = entry(_o, _ref(1, _s, 0, 1, "standard", transposed=True),
                    edges=at_least(_o, {}), doc=f"F.conv_transpose1d stride {_s}")
