"""The C family's statement tree: what the emitters build and the one printer prints.

Plain mutable dataclasses (the emitters append to bodies while they walk the plan, and the
MTIA staging pass rewrites the tree in place); expressions inside them are already text."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Decl:
    name: str
    ctype: str  # f32 | i64 | ...
    init: str | None = None
    size: int | None = None  # local array


@dataclass
class Assign:
    target: str
    value: str


@dataclass
class AddTo:
    """`target += value` where other programs may add to the same element (an accumulating
    store): atomic where programs run in parallel. `dtype` is the element's (f32, i32, i64)."""

    target: str
    value: str
    dtype: str


@dataclass
class Comment:
    text: str


@dataclass
class For:
    var: str
    hi: str
    body: list
    kind: str = "seq"  # grid | seq | simd
    reduction: tuple[str, str] | None = None  # (op, var) for simd reductions
    vector: int | None = None
    unroll: int | str | None = None


@dataclass
class Prefetch:
    """A hint to fetch the cache line at `addr` (an lvalue) ahead of its use."""

    addr: str


@dataclass
class If:
    cond: str
    body: list


@dataclass
class Check:
    """Early exit of the launcher when a shape guard fails."""

    cond: str
    code: int


@dataclass
class Line:
    text: str  # one raw statement, e.g. a barrier


@dataclass
class Scope:
    body: list


@dataclass
class Unroll:
    """The body once per lane `var` = 0 .. count-1, each copy in its own scope (printed
    unrolled: constant register indices keep lane arrays out of local/LDS memory)."""

    var: str
    count: int
    body: list


@dataclass
class Range:
    """for (v = start; v < stop; v += step): a loop strided over threads or lanes."""

    var: str
    start: str
    stop: str
    step: str
    body: list
    unroll: int | str | None = None


__all__ = ["Decl", "Assign", "AddTo", "Comment", "For", "Prefetch", "If", "Check", "Line", "Scope",
           "Unroll", "Range"]
