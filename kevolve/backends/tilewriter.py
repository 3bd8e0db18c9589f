"""Shared walk over a KernelPlan for tile-level backends: loop structure, axis values and
the order in which steps are emitted. A backend subclasses it and fills in the syntax."""

from __future__ import annotations

from ..ir.nodes import AxisRef, Expr, Load, Reduce, walk
from ..schedule.plan import KernelPlan, PLoop, Step


def reduces_in(e: Expr) -> list[Reduce]:
    """Reduce nodes of an expression, innermost first; nested reductions are rejected."""
    out: list[Reduce] = []
    for n in walk(e):
        if isinstance(n, Reduce):
            if any(isinstance(m, Reduce) for m in walk(n.body)):
                raise NotImplementedError("a reduction inside a reduction: split it into "
                                          "two stages")
            if n not in out:
                out.append(n)
    return out


def grid_count(k: KernelPlan, lp: PLoop) -> Expr:
    """Number of programs along a grid loop, as an expression over dims."""
    root = k.root
    if len(lp.origin) == 2:
        a, b = (root.axis(n) for n in lp.origin)
        return a.extent * b.extent
    a = root.axis(lp.origin[0])
    ext = a.bound if a.is_jagged else a.extent
    inner = [x for x in k.loops if x.origin == lp.origin and x.role == "block"]
    if inner:
        s = inner[0].size
        return (ext + (s - 1)) // s
    return ext


def levels(k: KernelPlan) -> list[tuple[PLoop | None, list[Step]]]:
    """Steps grouped by the loop they sit in: (None, top steps), then each seq loop."""
    seq = [lp for lp in k.loops if lp.role == "seq"]
    out: list[tuple[PLoop | None, list[Step]]] = [(None, [s for s in k.steps if s.level is None])]
    for lp in seq:
        out.append((lp, [s for s in k.steps if s.level == lp.name]))
    return out


def reads_contiguous(ld: Load, axis: str) -> bool:
    """Whether `axis` appears in the load's last (fastest) index."""
    if not ld.index:
        return False
    return any(isinstance(x, AxisRef) and x.axis.name == axis for x in walk(ld.index[-1]))
