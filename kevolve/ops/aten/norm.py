"""Normalizations: layer, rms, group, instance and batch norm (inference with running stats,
and training-mode batch statistics), and F.normalize. One helper makes the statistics
(mean and rstd over some dims of x, in f32) and each op is which dims those are and which
dims its weight and bias follow. group_norm takes x as [B, G, C/G, L] (torch's contiguous
[B, C, L] viewed by group)."""

from __future__ import annotations

from ...ir.builder import (
    axes,
    cast,
    compute,
    dims,
    f32,
    input,
    maximum,
    op,
    reduce_axis,
    rsqrt,
    sqrt,
    sum_,
)
from ..spec import domain
from ._entry import at_least, entry

EPS = 1e-5


def _stats(x, ds, sp, red_pos, rms=False, eps=EPS):
    """(mean stage or None, rstd stage) over dims `red_pos` of x, per point of the rest."""
    keep = tuple(a for q, a in enumerate(sp) if q not in red_pos)
    rd = {q: reduce_axis(f"r{q}", ds[q]) for q in red_pos}
    idx = tuple(rd.get(q, a) for q, a in enumerate(sp))
    n = 1
    for q in red_pos:
        n = ds[q] * n
    cnt = cast(n, f32)
    red = tuple(rd.values())
    if rms:
        return None, compute("rstd", keep, rsqrt(sum_(x[idx] * x[idx], over=red) / cnt + eps))
    mean = compute("mean", keep, sum_(x[idx], over=red) / cnt)
    c = x[idx] - mean[keep]
    rstd = compute("rstd", keep, rsqrt(sum_(c * c, over=red) / cnt + eps))
    return mean, rstd


def _norm(name, names, red_pos, affine_pos=None, rms=False, bias=True):
    ds = dims(names)
    x = input("x", ds, f32)
    sp = axes(" ".join("bcdhw"[: len(ds)]), *ds)
    keep = tuple(a for q, a in enumerate(sp) if q not in red_pos)
    mean, rstd = _stats(x, ds, sp, red_pos, rms)
    v = x[sp] if mean is None else x[sp] - mean[keep]
    v = v * rstd[keep]
    ins = [x]
    if affine_pos is not None:
        shp = tuple(ds[q] for q in affine_pos)
        at = tuple(sp[q] for q in affine_pos)
        w = input("weight", shp, f32)
        ins.append(w)
        v = v * w[at]
        if bias:
            b = input("bias", shp, f32)
            ins.append(b)
            v = v + b[at]
    return op(name, inputs=ins, outputs=[compute("y", sp, v)])


def _layer_norm(t, p):
    import torch.nn.functional as F

    x = t["x"]
    return F.layer_norm(x, x.shape[-1:], t["weight"], t["bias"], eps=EPS)


def _layer_norm_2d(t, p):
    import torch.nn.functional as F

    x = t["x"]
    return F.layer_norm(x, x.shape[-2:], t["weight"], t["bias"], eps=EPS)


def _layer_norm_plain(t, p):
    import torch.nn.functional as F

    return F.layer_norm(t["x"], t["x"].shape[-1:], eps=EPS)


def _rms_norm(t, p):
    import torch.nn.functional as F

    return F.rms_norm(t["x"], t["x"].shape[-1:], t["weight"], eps=EPS)


def _group_norm(t, p):
    import torch.nn.functional as F

    x = t["x"]
    B, G, Cg, L = x.shape
    y = F.group_norm(x.reshape(B, G * Cg, L), G, t["weight"].reshape(-1),
                     t["bias"].reshape(-1), eps=EPS)
    return y.reshape(B, G, Cg, L)


def _instance_norm(t, p):
    import torch.nn.functional as F

    return F.instance_norm(t["x"], eps=EPS)


def _instance_norm_affine(t, p):
    import torch.nn.functional as F

    return F.instance_norm(t["x"], weight=t["weight"], bias=t["bias"], eps=EPS)


def _batch_norm_train(t, p):
    import torch.nn.functional as F

    return F.batch_norm(t["x"], None, None, t["weight"], t["bias"], training=True, eps=EPS)


def _batch_norm_eval(t, p):
    import torch.nn.functional as F

    return F.batch_norm(t["x"], t["running_mean"], t["running_var"], t["weight"], t["bias"],
                        training=False, eps=EPS)


def batch_norm_eval_op(names: str, name: str):
    ds = dims(names)
    C = ds[1]
    x = input("x", ds, f32)
    rm, rv = input("running_mean", (C,), f32), input("running_var", (C,), f32)
    w, b = input("weight", (C,), f32), input("bias", (C,), f32)
    sp = axes(" ".join("bcdhw"[: len(ds)]), *ds)
    c = sp[1]
    y = compute("y", sp, (x[sp] - rm[c]) * rsqrt(rv[c] + EPS) * w[c] + b[c])
    return op(name, inputs=[x, rm, rv, w, b], outputs=[y])


def normalize_op():
    """F.normalize(x, dim=1): x / max(||x||_2, 1e-12) per row."""
    M, N = dims("M N")
    x = input("x", (M, N), f32)
    i, j = axes("i j", M, N)
    k = reduce_axis("k", N)
    nrm = compute("nrm", (i,), sqrt(sum_(x[i, k] * x[i, k], over=k)))
    return op("normalize", inputs=[x], outputs=[
        compute("y", (i, j), x[i, j] / maximum(nrm[i], 1e-12))])


def _normalize(t, p):
    import torch.nn.functional as F

    return F.normalize(t["x"], dim=1)


_BN = {"running_var": domain(0.5, 2.0)}
_SPECS = [
    (_norm("layer_norm", "M N", (1,), (1,)), _layer_norm, None),
    (_norm("layer_norm_2d", "B H W", (1, 2), (1, 2)), _layer_norm_2d, None),
    (_norm("layer_norm_no_affine", "M N", (1,)), _layer_norm_plain, None),
    (_norm("rms_norm", "M N", (1,), (1,), rms=True, bias=False), _rms_norm, None),
    (_norm("group_norm", "B G Cg L", (2, 3), (1, 2)), _group_norm, None),
    (_norm("instance_norm", "B C L", (2,)), _instance_norm, None),
    (_norm("instance_norm_affine", "B C L", (2,), (1,)), _instance_norm_affine, None),
    (_norm("batch_norm_train", "B C L", (0, 2), (1,)), _batch_norm_train, None),
    (_norm("batch_norm_train_2d", "B C H W", (0, 2, 3), (1,)), _batch_norm_train, None),
    (batch_norm_eval_op("B C L", "batch_norm"), _batch_norm_eval, _BN),
    (batch_norm_eval_op("B C H W", "batch_norm_2d"), _batch_norm_eval, _BN),
    (normalize_op(), _normalize, None),
]
# torch refuses statistics of a single value: those ops' edge shapes keep two per group
_MIN = {"L": 2, "W": 2}
OPS = {o.name: entry(o, ref, inputs=doms, edges=at_least(o, _MIN)) for o, ref, doms in _SPECS}
