"""Scan specs for the tests: a reduction over a window of one of the stage's own axes, in
the four forms the `scan` strategy recognizes (inclusive or exclusive, forward or reverse),
along any axis of a 2-d or 3-d input, and a few that look alike but are not prefix
reductions."""

from __future__ import annotations

from kevolve.ir.builder import axes, axis, compute, dims, f32, input, max_, min_, op, prod_, sum_

REDUCE = {"sum": sum_, "prod": prod_, "max": max_, "min": min_}
FORMS = ("inclusive", "exclusive", "reverse", "reverse_exclusive")


def scan(kind: str = "sum", form: str = "inclusive", along: int = -1, rank: int = 2,
         scale: bool = False):
    """y[.., j, ..] = kind over the window of j's form; `scale`: times 2 after the reduction
    (an epilogue over the running value)."""
    names = "M N" if rank == 2 else "A B C"
    ds = dims(names)
    x = input("x", ds, f32)
    sp = axes(" ".join("ijl"[:rank]), *ds)
    p = along % rank
    j, n = sp[p], ds[p]
    k = {"inclusive": lambda: axis("k", j + 1, max_extent=n, reduce=True),
         "exclusive": lambda: axis("k", j, max_extent=n, reduce=True),
         "reverse": lambda: axis("k", n - j, start=j, max_extent=n, reduce=True),
         "reverse_exclusive": lambda: axis("k", n - j - 1, start=j + 1, max_extent=n,
                                           reduce=True)}[form]()
    v = x[tuple(k if q == p else a for q, a in enumerate(sp))]
    body = REDUCE[kind](v, over=k)
    y = compute("y", sp, body * 2.0 if scale else body)
    return op(f"{kind}_{form}_{p}", inputs=[x], outputs=[y])
