"""Prefix reductions: a Reduce over a window of one of the stage's own axes that grows by
one element per step of that axis, so that it can be computed as a running accumulation.

`y[.., j, ..] = op_{k in [0, j + 1)} f(k, ..)` (inclusive forward), `[0, j)` (exclusive
forward), `[j, N)` or `[j + 1, N)` (inclusive and exclusive reverse, N the extent of j), with
op in sum, prod, max, min and f not depending on j except through k: each output element
is the previous one combined with f at k = j + shift (shift 0 inclusive, -1 or +1
exclusive; no term where that k is outside the window, i.e. where the window is empty).
Lowering with the `scan` strategy walks j in order inside one program and carries the
accumulator: O(N) per row instead of the O(N^2) of re-reading every prefix. Anything else
(a body that depends on j, several reduce axes, other bounds) is not a prefix reduction
and keeps the plain lowering."""

from __future__ import annotations

from dataclasses import dataclass

from .nodes import AxisRef, Binary, Compute, Const, Dim, Expr, Reduce, walk

COMBINES = ("sum", "prod", "max", "min")  # associative and commutative: carried chunk to chunk


@dataclass(frozen=True)
class Prefix:
    """A prefix reduction `r` of stage axis `axis`, walked forward or in reverse."""

    reduce: Reduce
    axis: str  # the stage's spatial axis that the window grows along
    reverse: bool
    shift: int = 0  # the element that joins the window at j is k = j + shift

    @property
    def nonempty(self) -> Expr:
        """Whether the window of the point is not empty (for an exclusive scan, it is at
        its first element): where k = j + shift is read, and max/min are not 0."""
        return Binary("gt", self.reduce.axes[0].extent, Const(0))


def _linear(e: Expr) -> dict[str, int] | None:
    """`e` as {name: coefficient} over axes ('@name') and dims, with the constant under ''
    (None when not linear with integer constants)."""
    if isinstance(e, Const):
        if not float(e.value).is_integer():
            return None
        return {"": int(e.value)} if e.value else {}
    if isinstance(e, AxisRef):
        return {"@" + e.axis.name: 1}
    if isinstance(e, Dim):
        return {e.name: 1}
    if isinstance(e, Binary) and e.op in ("add", "sub"):
        a, b = _linear(e.a), _linear(e.b)
        if a is None or b is None:
            return None
        s = -1 if e.op == "sub" else 1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + s * v
        return {k: v for k, v in out.items() if v}
    if isinstance(e, Binary) and e.op == "mul":
        for c, x in ((e.a, e.b), (e.b, e.a)):
            if isinstance(c, Const) and float(c.value).is_integer():
                lx = _linear(x)
                return None if lx is None else {k: v * int(c.value) for k, v in lx.items()
                                                if v * int(c.value)}
    return None


def _refs(e: Expr) -> set[str]:
    return {n.axis.name for n in walk(e) if isinstance(n, AxisRef)}


def match(stage: Compute, body: Expr) -> tuple[Prefix | None, str]:
    """The prefix reduction of a stage's (effective) body, or None and why not."""
    reds = [n for n in walk(body) if isinstance(n, Reduce)]
    if len(reds) != 1:
        return None, f"it has {len(reds)} reductions; a scan has one"
    return of_reduce(reds[0], stage)


def of_reduce(r: Reduce, stage: Compute) -> tuple[Prefix | None, str]:
    """Whether reduction `r` in a body of `stage` is a prefix reduction of a stage axis."""
    if r.op not in COMBINES:
        return None, f"{r.op!r} is not an associative combine ({', '.join(COMBINES)})"
    if len(r.axes) != 1:
        return None, "it reduces over several axes; a scan has one"
    k = r.axes[0]
    start, end = _linear(k.start), _linear(Binary("add", k.start, k.extent))
    if start is None or end is None:
        return None, f"the bounds of {k.name!r} are not linear in the stage's axes"
    for j in stage.axes:
        if _linear(j.start) != {} or j.is_jagged:
            continue
        key = "@" + j.name
        ext = _linear(j.extent)
        if start == {} and end in ({key: 1, "": 1}, {key: 1}):
            reverse, shift = False, end.get("", 0) - 1
        elif start in ({key: 1}, {key: 1, "": 1}) and ext is not None and end == ext:
            reverse, shift = True, start.get("", 0)
        else:
            continue
        if j.name in _refs(r.body):
            return None, (f"its body depends on {j.name!r} other than through "
                          f"{k.name!r}, so one running value cannot serve every {j.name!r}")
        return Prefix(r, j.name, reverse, shift), ""
    return None, (f"{k.name!r} does not range over [0, j + 1), [0, j), [j, extent of j) or "
                  "[j + 1, extent of j) of a stage axis j")

