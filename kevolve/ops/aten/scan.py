"""Inclusive scans along a dim: out[.., j] = op over x[.., 0..j], written as a reduction over a
dependent axis `0 <= k <= j` (O(N^2) in the interpreter's terms; a backend may lower it as
it likes). Kinds: cumsum, cumprod, cummax, cummin,
logcumsumexp; along the last dim of x[M, N], the first, and the middle dim of x[A, B, C]."""

from __future__ import annotations

from ...ir.builder import (
    axes,
    axis,
    compute,
    dims,
    exp,
    f32,
    input,
    log,
    max_,
    min_,
    op,
    prod_,
    sum_,
)
from ._entry import at_least, entry

MODES = {"last": ("M N", 1, -1), "first": ("M N", 0, 0), "middle": ("A B C", 1, 1)}


def scan_op(kind: str, mode: str):
    names, p, _ = MODES[mode]
    ds = dims(names)
    x = input("x", ds, f32)
    sp = axes(" ".join("ijl"[: len(ds)]), *ds)
    k = axis("k", sp[p] + 1, max_extent=ds[p], reduce=True)
    idx = tuple(k if q == p else a for q, a in enumerate(sp))
    v = x[idx]
    if kind == "logcumsumexp":
        m = compute("m", sp, max_(v, over=k))
        y = compute("y", sp, log(sum_(exp(v - m[sp]), over=k)) + m[sp])
    else:
        body = {"cumsum": lambda: sum_(v, over=k), "cumprod": lambda: prod_(v, over=k),
                "cummax": lambda: max_(v, over=k), "cummin": lambda: min_(v, over=k)}[kind]()
        y = compute("y", sp, body)
    return op(f"{kind}_{mode}", inputs=[x], outputs=[y])


def _ref(kind: str, dim: int):
    def ref(t, p):
        import torch

        x = t["x"]
        if kind in ("cummax", "cummin"):
            return getattr(torch, kind)(x, dim=dim).values
        return getattr(torch, kind)(x, dim=dim)
    ref.__qualname__ = f"torch.{kind}(dim={dim})"
    return ref


def _make(kind: str, mode: str):
    o = scan_op(kind, mode)
    return entry(o, _ref(kind, MODES[mode][2]), edges=at_least(o, {}),
                 doc=f"torch.{kind} along dim {MODES[mode][2]}")


PLAN = {"cumsum": ("last", "first", "middle"), "cumprod": ("last", "first"),
        "cummax": ("last", "first"), "cummin": ("last",), "logcumsumexp": ("last", "first")}
OPS = {f"{k}_{m}": _make(k, m) for k, modes in PLAN.items() for m in modes}

