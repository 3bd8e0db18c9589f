"""Losses over a batch x[N, C] (or vectors of N): a per-element term, then torch's reduction
('mean' divides the sum by the element count; 'sum'; 'none' keeps the terms). The terms are a
table; the reductions are the same three for every loss. Class targets are int64 labels
in [0, C) (a gather of the logit); ±1 targets are drawn from {-1, 1}."""

from __future__ import annotations

from ...ir.builder import (
    abs_,
    axes,
    cast,
    compute,
    dims,
    eq,
    exp,
    f32,
    i64,
    input,
    log,
    log1p,
    max_,
    maximum,
    ne,
    op,
    reduce_axis,
    sqrt,
    sum_,
    where,
)
from ..spec import domain
from ._entry import at_least, entry

_SIGN = domain(-1.0, 1.0, integer=True)


def _pm1(t):
    """A {-1, 1} target from a draw in {-1, 0, 1} (0 counts as 1)."""
    return where(t < 0.0, -1.0, 1.0)


# name -> (term of (x, y) at a point, torch reference (a name takes reduction=), domains)
POINTWISE = {
    "mse_loss": (lambda x, y: (x - y) * (x - y), "F.mse_loss", {}),
    "l1_loss": (lambda x, y: abs_(x - y), "F.l1_loss", {}),
    "smooth_l1_loss": (lambda x, y: where(abs_(x - y) < 1.0, 0.5 * (x - y) * (x - y),
                                          abs_(x - y) - 0.5), "F.smooth_l1_loss", {}),
    "huber_loss": (lambda x, y: where(abs_(x - y) < 1.0, 0.5 * (x - y) * (x - y),
                                      abs_(x - y) - 0.5), "F.huber_loss", {}),
    "binary_cross_entropy": (lambda x, y: -(y * maximum(log(x), -100.0)
                                            + (1.0 - y) * maximum(log(1.0 - x), -100.0)),
                             "F.binary_cross_entropy",
                             {"x": domain(0.05, 0.95), "y": domain(0.0, 1.0)}),
    "binary_cross_entropy_with_logits": (
        lambda x, y: maximum(x, 0.0) - x * y + log1p(exp(-abs_(x))),
        "F.binary_cross_entropy_with_logits", {"y": domain(0.0, 1.0)}),
    "soft_margin_loss": (lambda x, y: log1p(exp(-_pm1(y) * x)),
                         lambda t, p: __import__("torch").nn.functional.soft_margin_loss(
                             t["x"], __import__("torch").where(t["y"] < 0, -1.0, 1.0).to(
                                 t["x"].dtype)), {"y": _SIGN}),
    "hinge_embedding_loss": (
        lambda x, y: where(ne(_pm1(y), 1.0), maximum(1.0 - x, 0.0), 0.0)
        + where(ne(_pm1(y), -1.0), x, 0.0),
        lambda t, p: __import__("torch").nn.functional.hinge_embedding_loss(
            t["x"], __import__("torch").where(t["y"] < 0, -1.0, 1.0).to(t["x"].dtype)),
        {"y": _SIGN}),
    "poisson_nll_loss": (lambda x, y: exp(x) - y * x, "F.poisson_nll_loss",
                         {"y": domain(0.0, 3.0)}),
    "kl_div": (lambda x, y: y * (log(y) - x), "F.kl_div", {"y": domain(0.05, 1.0)}),
}


def pointwise_loss(name, term, reduction):
    N, C = dims("N C")
    x, y = input("x", (N, C), f32), input("y", (N, C), f32)
    i, j = axes("i j", N, C)
    ri, rj = reduce_axis("ri", N), reduce_axis("rj", C)
    if reduction == "none":
        return op(name, inputs=[x, y], outputs=[compute("out", (i, j), term(x[i, j], y[i, j]))])
    s = sum_(term(x[ri, rj], y[ri, rj]), over=(ri, rj))
    if reduction == "mean":
        s = s / cast(N * C, f32)
    return op(name, inputs=[x, y], outputs=[compute("out", (), s)])


def _named_ref(name, fn, reduction):
    if isinstance(fn, str):
        def ref(t, p):
            import torch.nn.functional as F

            f = getattr(F, fn.removeprefix("F."))
            return f(t["x"], t["y"], reduction=reduction)
        ref.__qualname__ = f"{fn}(reduction={reduction!r})"
        return ref
    return fn


def cross_entropy_op(name, kind, reduction="mean"):
    """cross_entropy (logits) or nll_loss (log-probabilities) with int64 class labels."""
    N, C = dims("N C")
    x = input("x", (N, C), f32)
    tgt = input("target", (N,), i64)
    (i,) = axes("i", N)
    k = reduce_axis("k", C)
    if kind == "cross_entropy":
        m = compute("m", (i,), max_(x[i, k], over=k))
        lse = compute("lse", (i,), log(sum_(exp(x[i, k] - m[i]), over=k)) + m[i])
        term = compute("term", (i,), lse[i] - x[i, tgt[i]])
    else:
        term = compute("term", (i,), -x[i, tgt[i]])
    if reduction == "none":
        return op(name, inputs=[x, tgt], outputs=[term])
    r = reduce_axis("r", N)
    s = sum_(term[r], over=r)
    return op(name, inputs=[x, tgt], outputs=[
        compute("out", (), s / cast(N, f32) if reduction == "mean" else s)])


def _ce_ref(kind, reduction):
    def ref(t, p):
        import torch.nn.functional as F

        return getattr(F, kind)(t["x"], t["target"], reduction=reduction)
    ref.__qualname__ = f"F.{kind}(reduction={reduction!r})"
    return ref


def pair_op(name):
    """Losses and similarities of row pairs x1, x2[N, D] (and triplets)."""
    N, D = dims("N D")
    (i,) = axes("i", N)
    d = reduce_axis("d", D)
    r = reduce_axis("r", N)
    a, b = input("x1", (N, D), f32), input("x2", (N, D), f32)
    if name == "cosine_similarity":
        dot = sum_(a[i, d] * b[i, d], over=d)
        na = sum_(a[i, d] * a[i, d], over=d)
        nb = sum_(b[i, d] * b[i, d], over=d)
        return op(name, inputs=[a, b], outputs=[compute(
            "out", (i,), dot / sqrt(maximum(na * nb, 1e-16)))])
    if name == "pairwise_distance":
        e = a[i, d] - b[i, d] + 1e-6
        return op(name, inputs=[a, b], outputs=[compute("out", (i,), sqrt(sum_(e * e, over=d)))])
    if name == "cosine_embedding_loss":
        y = input("y", (N,), f32)
        dot = sum_(a[i, d] * b[i, d], over=d)
        na = sum_(a[i, d] * a[i, d], over=d) + 1e-12
        nb = sum_(b[i, d] * b[i, d], over=d) + 1e-12
        cs = compute("cs", (i,), dot / sqrt(na * nb))
        yy = _pm1(y[r])
        term = where(eq(yy, 1.0), 1.0 - cs[r], maximum(cs[r], 0.0))
        return op(name, inputs=[a, b, y], outputs=[compute(
            "out", (), sum_(term, over=r) / cast(N, f32))])
    if name == "margin_ranking_loss":
        x1, x2, y = input("x1", (N,), f32), input("x2", (N,), f32), input("y", (N,), f32)
        term = maximum(-_pm1(y[r]) * (x1[r] - x2[r]), 0.0)
        return op(name, inputs=[x1, x2, y], outputs=[compute(
            "out", (), sum_(term, over=r) / cast(N, f32))])
    # triplet_margin_loss: margin 1, p = 2, eps 1e-6
    n = input("x3", (N, D), f32)
    ep = a[i, d] - b[i, d] + 1e-6
    en = a[i, d] - n[i, d] + 1e-6
    dp = compute("dp", (i,), sqrt(sum_(ep * ep, over=d)))
    dn = compute("dn", (i,), sqrt(sum_(en * en, over=d)))
    return op(name, inputs=[a, b, n], outputs=[compute(
        "out", (), sum_(maximum(dp[r] - dn[r] + 1.0, 0.0), over=r) / cast(N, f32))])


def _pair_ref(name):
    def ref(t, p):
        import torch
        import torch.nn.functional as F

        if name == "cosine_similarity":
            return F.cosine_similarity(t["x1"], t["x2"], dim=1)
        if name == "pairwise_distance":
            return F.pairwise_distance(t["x1"], t["x2"])
        if name in ("cosine_embedding_loss", "margin_ranking_loss"):
            y = torch.where(t["y"] < 0, -1.0, 1.0).to(t["x1"].dtype)
            return getattr(F, name)(t["x1"], t["x2"], y)
        return F.triplet_margin_loss(t["x1"], t["x2"], t["x3"])
    ref.__qualname__ = f"F.{name}"
    return ref


def multi_margin_op():
    """F.multi_margin_loss (p=1, margin=1): mean over rows of sum_{c != y} max(0, 1 - x[y] +
    x[c]) / C."""
    N, C = dims("N C")
    x, tgt = input("x", (N, C), f32), input("target", (N,), i64)
    (i,) = axes("i", N)
    c, r = reduce_axis("c", C), reduce_axis("r", N)
    term = compute("term", (i,), sum_(where(eq(c, tgt[i]), 0.0,
                                            maximum(1.0 - x[i, tgt[i]] + x[i, c], 0.0)),
                                      over=c) / cast(C, f32))
    return op("multi_margin_loss", inputs=[x, tgt], outputs=[compute(
        "out", (), sum_(term[r], over=r) / cast(N, f32))])


def _mm_ref(t, p):
    import torch.nn.functional as F

    return F.multi_margin_loss(t["x"], t["target"])


OPS = {}
for _n, (_term, _fn, _doms) in POINTWISE.items():
    _reds = ("mean", "sum", "none") if _n in ("mse_loss", "l1_loss") else ("mean",)
    for _r in _reds:
        _name = _n if _r == "mean" else f"{_n}_{_r}"
        _o = pointwise_loss(_name, _term, _r)  # kl_div's 'mean' divides by every element
        OPS[_name] = entry(_o, _named_ref(_n, _fn, _r), inputs=_doms or None,
                           edges=at_least(_o, {}))
for _k in ("cross_entropy", "nll_loss"):
    for _r in ("mean", "sum", "none"):
        _name = _k if _r == "mean" else f"{_k}_{_r}"
        _o = cross_entropy_op(_name, _k, _r)
        OPS[_name] = entry(_o, _ce_ref(_k, _r), edges=at_least(_o, {}))
for _n in ("cosine_similarity", "pairwise_distance", "cosine_embedding_loss",
           "margin_ranking_loss", "triplet_margin_loss"):
    _o = pair_op(_n)
    OPS[_n] = entry(_o, _pair_ref(_n),
                    inputs={"y": _SIGN} if "y" in {b.name for b in _o.inputs} else None,
                    edges=at_least(_o, {}))
_o = multi_margin_op()
OPS["multi_margin_loss"] = entry(_o, _mm_ref, edges=at_least(_o, {}))
