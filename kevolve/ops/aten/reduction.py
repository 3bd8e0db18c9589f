"""Reductions over any dims: each kind (sum, mean, prod, amax, amin, var, std, norm,
logsumexp, argmax, argmin, ...) over the last dim of x[M, N], the first, the middle dim of
x[A, B, C], dims (0, 2) of x[A, B, C], and every dim (a 0-d output). A kind is a formula of
the loads over the reduce axes; the modes are the same for every kind."""

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
    max_,
    min_,
    ne,
    op,
    prod_,
    reduce_axis,
    sqrt,
    sum_,
    where,
)
from ..spec import domain
from ._entry import at_least, entry

# mode -> (input dims, reduced positions, torch dim argument: None reduces everything)
MODES = {"last": ("M N", (1,), -1), "first": ("M N", (0,), 0),
         "middle": ("A B C", (1,), 1), "dims02": ("A B C", (0, 2), (0, 2)),
         "all": ("M N", (0, 1), None)}


def _stats(x, idx, red, count):
    """Single-stage kinds: name -> expression (one output per point of the kept dims)."""
    v = x[idx]
    nz = where(ne(v, 0.0), 1.0, 0.0)
    return {
        "sum": lambda: sum_(v, over=red),
        "mean": lambda: sum_(v, over=red) / count,
        "amax": lambda: max_(v, over=red),
        "amin": lambda: min_(v, over=red),
        "prod": lambda: prod_(v, over=red),
        "norm": lambda: sqrt(sum_(v * v, over=red)),
        "norm1": lambda: sum_(abs_(v), over=red),
        "norm_inf": lambda: max_(abs_(v), over=red),
        "any": lambda: max_(nz, over=red),
        "all": lambda: min_(nz, over=red),
        "count_nonzero": lambda: sum_(nz, over=red),
        "nansum": lambda: sum_(v, over=red),
        "nanmean": lambda: sum_(v, over=red) / count,
    }


def _ref(fn_name: str, dim, **kw):
    def ref(t, p):
        import torch

        fn = eval(fn_name, {"torch": torch})  # noqa: S307 - a fixed name from this module
        x = t["x"]
        return fn(x, **kw) if dim is None else fn(x, dim=dim, **kw)
    ref.__qualname__ = f"{fn_name}(dim={dim})"
    return ref


_TORCH = {"sum": "torch.sum", "mean": "torch.mean", "amax": "torch.amax",
          "amin": "torch.amin", "prod": "torch.prod", "norm": "torch.linalg.vector_norm",
          "any": "torch.any", "all": "torch.all", "count_nonzero": "torch.count_nonzero",
          "nansum": "torch.nansum", "nanmean": "torch.nanmean", "var": "torch.var",
          "std": "torch.std", "logsumexp": "torch.logsumexp", "argmax": "torch.argmax",
          "argmin": "torch.argmin", "norm1": "torch.linalg.vector_norm",
          "norm_inf": "torch.linalg.vector_norm"}


def reduce_op(kind: str, mode: str):
    names, red_pos, _ = MODES[mode]
    ds = dims(names)
    ds = ds if isinstance(ds, tuple) else (ds,)
    x = input("x", ds, f32)
    keep = [p for p in range(len(ds)) if p not in red_pos]
    sp = axes(" ".join("ijl"[k] for k in range(len(keep))), *[ds[p] for p in keep]) \
        if keep else ()
    rd = tuple(reduce_axis(f"r{p}", ds[p]) for p in red_pos)
    idx = [None] * len(ds)
    for a, p in zip(sp, keep):
        idx[p] = a
    for a, p in zip(rd, red_pos):
        idx[p] = a
    idx = tuple(idx)
    n = 1
    for p in red_pos:
        n = ds[p] * n
    count = cast(n, f32)
    name = f"{kind}_{mode}"
    if kind in ("var", "std"):
        mean = compute("mean", sp, sum_(x[idx], over=rd) / count)
        c = x[idx] - mean[tuple(sp)]
        var = sum_(c * c, over=rd) / (count - 1.0)
        y = compute("y", sp, sqrt(var) if kind == "std" else var)
    elif kind == "logsumexp":
        m = compute("m", sp, max_(x[idx], over=rd))
        y = compute("y", sp, log(sum_(exp(x[idx] - m[tuple(sp)]), over=rd)) + m[tuple(sp)])
    elif kind in ("argmax", "argmin"):
        m = compute("m", sp, (max_ if kind == "argmax" else min_)(x[idx], over=rd))
        flat = rd[0]
        for a, p in zip(rd[1:], red_pos[1:]):
            flat = flat * ds[p] + a
        y = compute("y", sp, min_(where(eq(x[idx], m[tuple(sp)]), flat, n), over=rd), dtype=i64)
    else:
        y = compute("y", sp, _stats(x, idx, rd, count)[kind]())
    return op(name, inputs=[x], outputs=[y])


def _make(kind: str, mode: str):
    o = reduce_op(kind, mode)
    dim = MODES[mode][2]
    kw = {"var": {"correction": 1}, "std": {"correction": 1}, "norm1": {"ord": 1},
          "norm_inf": {"ord": float("inf")}}.get(kind, {})
    if kind == "logsumexp" and dim is None:
        dim = (0, 1)
    if kind in ("argmax", "argmin", "prod") and isinstance(dim, tuple):
        raise ValueError(f"{kind} takes one dim")
    doms = {"any": {"x": domain(0.0, 1.0, integer=True)},
            "all": {"x": domain(0.0, 1.0, integer=True)},
            "count_nonzero": {"x": domain(-1.0, 1.0, integer=True)}}
    return entry(o, _ref(_TORCH[kind], dim, **kw), inputs=doms.get(kind),
                 edges=at_least(o, {}), doc=f"{_TORCH[kind]} over dims {dim}")


ALL_MODES = ("last", "first", "middle", "all")
PLAN = {k: ALL_MODES for k in ("sum", "mean", "amax", "amin", "prod", "var", "std", "norm",
                                "logsumexp", "argmax", "argmin")}
PLAN.update({"any": ("last", "all"), "all": ("last", "all"), "count_nonzero": ("last",),
             "norm1": ("last",), "norm_inf": ("last",), "nansum": ("last",), "nanmean": ("last",)})
for _k in ("sum", "mean", "amax", "amin", "norm", "var", "std", "logsumexp"):
    PLAN[_k] = PLAN[_k] + ("dims02",)

OPS = {f"{k}_{m}": _make(k, m) for k, modes in PLAN.items() for m in modes}

