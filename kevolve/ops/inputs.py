"""Valid random inputs derived from an op's IR, so nobody writes a generator per op.

The IR already says most of what makes an input valid; what it cannot say, a spec declares
(kevolve.ops.spec: `lengths`, `domain`). Read from the IR:

- shapes and dtypes from the input buffers and a shape dict (dims and params);
- offsets: an integer input loaded in a jagged axis's bounds, or a 1-d integer input of
  shape `B + 1` (FBGEMM's format), gets offsets from a length distribution (empty segments
  included), bounded by the jagged axes' `max_extent`; the dim its segments index (the
  total `T` of `values[T, D]`) is then the offsets' last entry, not a preset's number;
- gather indices: an integer input loaded inside another load's index draws from
  `[0, extent)` of the dimension it indexes; one compared with an axis (a label tested
  `j == target[i]`) from `[0, extent of the axis)`; one in a stage's `store=` (a
  scatter-add's index) from `[0, extent)` of the output dimension it indexes;
- domains: an input fed (through casts) to log, sqrt or rsqrt is drawn positive, one that
  divides is drawn away from zero (an integer divisor of either sign, where floor and
  truncating division differ);
- contractions: operands of `sum(A * B)` are scaled by extent^-1/4 each, so products summed
  over a long axis stay of order one in any storage type.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ShapeError
from ..ir.interp import eval_int
from ..ir.nodes import (
    AxisRef,
    Binary,
    Cast,
    Dim,
    Expr,
    Load,
    Op,
    Reduce,
    Unary,
    children,
    dim_offset,
    op_dims,
    product_factors,
    walk,
    walk_stage,
)

LENGTH_DISTS = ("uniform", "skewed", "full", "empty", "one_long")
_ALIASES = {"all_empty": "empty"}


@dataclass(frozen=True)
class Lengths:
    """An offsets input: segment lengths drawn from `dist` (see `jagged_lengths`)."""

    dist: str = "uniform"


@dataclass(frozen=True)
class Domain:
    """Values of a float or integer input: in [lo, hi], > 0, or away from 0."""

    lo: float | None = None
    hi: float | None = None
    positive: bool = False
    nonzero: bool = False
    integer: bool = False


@dataclass(frozen=True)
class Analysis:
    """What the IR says about each input (see the module docstring)."""

    offsets: dict[str, tuple[Expr, ...]] = field(default_factory=dict)  # name -> max extents
    totals: dict[str, str] = field(default_factory=dict)  # dim -> offsets input it counts
    index_of: dict[str, Expr] = field(default_factory=dict)  # int input -> exclusive bound
    domains: dict[str, Domain] = field(default_factory=dict)
    scale: dict[str, Expr] = field(default_factory=dict)  # input -> reduce extent (product)
    dists: dict[str, str] = field(default_factory=dict)  # offsets input -> declared dist


def jagged_lengths(rng: np.random.Generator, b: int, max_len: int, mode: str = "uniform"
                   ) -> np.ndarray:
    """Segment lengths in [0, max_len]. uniform: in [0, max_len) with at least one empty
    segment when b > 1; skewed: most short, a few up to max_len, some empty; full: all
    max_len; empty (all_empty): all 0; one_long: one of max_len, the rest empty."""
    mode = _ALIASES.get(mode, mode)
    if mode == "uniform":
        lens = rng.integers(0, max(max_len, 1), size=b)
        if b > 1:
            lens[rng.integers(0, b)] = 0
    elif mode == "skewed":
        lens = np.minimum(rng.geometric(min(1.0, 4.0 / max(max_len, 1)), size=b) - 1, max_len)
        if b > 1:
            lens[rng.integers(0, b)] = max_len
            lens[rng.integers(0, b)] = 0
    elif mode == "empty":
        lens = np.zeros(b, dtype=np.int64)
    elif mode == "one_long":
        lens = np.zeros(b, dtype=np.int64)
        if b:
            lens[rng.integers(0, b)] = max_len
    elif mode == "full":
        lens = np.full(b, max_len)
    else:
        raise ShapeError(f"unknown length distribution {mode!r}; give one of "
                         f"{', '.join(LENGTH_DISTS)}")
    return np.asarray(lens, dtype=np.int64)


def offsets_of(lengths: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def round_bf16(a: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bf16 (ties to even), kept in float32."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    bias = ((u >> 16) & 1) + np.uint32(0x7FFF)
    return ((u + bias) & np.uint32(0xFFFF0000)).view(np.float32)


def as_dtype(a: np.ndarray, dtype: str) -> np.ndarray:
    """Host array holding values of `dtype` (bf16: float32 rounded to bf16)."""
    x = np.asarray(a, dtype=np.float32)
    return round_bf16(x) if dtype == "bf16" else x.astype(np.float16) if dtype == "f16" else x


def _strip(e: Expr) -> Expr:
    while isinstance(e, Cast):
        e = e.x
    return e


def _shallow(e: Expr):
    """Nodes of an index expression, not descending into loads (a load's own index is
    another question)."""
    stack = [e]
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, Load):
            stack.extend(children(n))




def analyse(op: Op, declared: dict | None = None) -> Analysis:
    """Read the IR (see the module docstring); `declared` (name -> Lengths | Domain) wins."""
    declared = declared or {}
    inputs = {b.name: b for b in op.inputs}
    ints = {n for n, b in inputs.items() if b.dtype.is_int}
    offsets: dict[str, list[Expr]] = {}
    jagged: dict[str, str] = {}  # axis name -> offsets input
    for s in op.stages:
        for a in s.axes + s.reduce_axes:
            bounds = [n for e in (a.start, a.extent) for n in walk(e)
                      if isinstance(n, Load) and n.buffer.name in ints]
            for ld in bounds:
                offsets.setdefault(ld.buffer.name, [])
                if a.max_extent is not None:
                    offsets[ld.buffer.name].append(a.max_extent)
                jagged[a.name] = ld.buffer.name
    for n, b in inputs.items():
        if n in ints and b.ndim == 1:
            do = dim_offset(b.shape[0])
            if do is not None and do[1] == 1:
                offsets.setdefault(n, [])
    for n, d in declared.items():
        if isinstance(d, Lengths):
            offsets.setdefault(n, [])
        elif n in offsets and isinstance(d, Domain):
            offsets.pop(n)
    totals: dict[str, str] = {}
    index_of: dict[str, Expr] = {}
    domains: dict[str, Domain] = {}
    scale: dict[str, Expr] = {}

    def mark(e: Expr, dom: Domain) -> None:
        e = _strip(e)
        if isinstance(e, Load) and e.buffer.name in inputs:
            old = domains.get(e.buffer.name, Domain())
            domains[e.buffer.name] = Domain(positive=old.positive or dom.positive,
                                            nonzero=old.nonzero or dom.nonzero)

    for s in op.stages:
        if s.store is not None:  # a scatter: an index input in store= ranges over the dim
            for p, ix in enumerate(s.store):
                for sub in _shallow(ix):
                    if isinstance(sub, Load) and sub.buffer.name in ints and \
                            sub.buffer.name not in offsets:
                        index_of.setdefault(sub.buffer.name, s.out.shape[p])
        for node in walk_stage(s):
            if isinstance(node, Load):
                for p, ix in enumerate(node.index):
                    for sub in _shallow(ix):
                        if isinstance(sub, Load) and sub.buffer.name in offsets or (
                                isinstance(sub, AxisRef) and sub.axis.name in jagged):
                            off = sub.buffer.name if isinstance(sub, Load) else \
                                jagged[sub.axis.name]
                            dim = node.buffer.shape[p]
                            if isinstance(dim, Dim) and node.buffer.name in inputs:
                                totals.setdefault(dim.name, off)
                        elif isinstance(sub, Load) and sub.buffer.name in ints:
                            index_of.setdefault(sub.buffer.name, node.buffer.shape[p])
            elif isinstance(node, Binary) and node.op in ("eq", "ne", "lt", "le", "gt", "ge"):
                for x, y in ((node.a, node.b), (node.b, node.a)):
                    x = _strip(x)
                    y = _strip(y)
                    if isinstance(x, AxisRef) and isinstance(y, Load) and \
                            y.buffer.name in ints and y.buffer.name not in offsets:
                        index_of.setdefault(y.buffer.name, x.axis.extent)
            elif isinstance(node, Unary) and node.op in ("log", "sqrt", "rsqrt"):
                mark(node.x, Domain(positive=True))
            elif isinstance(node, Binary) and node.op in ("div", "floordiv", "mod"):
                mark(node.b, Domain(nonzero=True))
            elif isinstance(node, Binary) and node.op == "pow":
                mark(node.a, Domain(positive=True))
            elif isinstance(node, Reduce):
                pf = product_factors(node)
                if pf is not None:
                    ext: Expr | None = None
                    for a in node.axes:
                        e = a.max_extent if a.max_extent is not None else a.extent
                        ext = e if ext is None else Binary("mul", ext, e)
                    for f in pf:
                        f = _strip(f)
                        if isinstance(f, Load) and f.buffer.name in inputs and ext is not None:
                            scale.setdefault(f.buffer.name, ext)
    for n, d in declared.items():
        if isinstance(d, Domain):
            domains[n] = d
    bounds = {n.name for exts in offsets.values() for e in exts for n in walk(e)
              if isinstance(n, Dim)}
    totals = {d: o for d, o in totals.items() if d not in bounds}  # dense[b, l - off[b]]
    dists = {n: d.dist for n, d in declared.items() if isinstance(d, Lengths)}
    return Analysis({k: tuple(v) for k, v in offsets.items()}, totals, index_of, domains,
                    scale, dists)


def free_dims(op: Op, analysis: Analysis) -> list[str]:
    """The dims a shape dict gives (all but the totals the offsets determine)."""
    return [d for d in op_dims(op) if d not in analysis.totals]


def _eval(e: Expr, env: dict[str, int], what: str) -> int:
    try:
        return eval_int(e, env)
    except Exception as exc:
        raise ShapeError(f"cannot size {what}: {exc}; give the dims it needs in the shape "
                         "(a preset or --shape NAME=VAL)") from None


def derive(op: Op, shape: dict, rng: np.random.Generator, analysis: Analysis):
    """(inputs by name, params) for one call: see the module docstring."""
    env = {k: int(v) for k, v in shape.items() if isinstance(v, int)
           and not isinstance(v, bool)}
    dist_over = shape.get("lengths")
    out: dict[str, np.ndarray] = {}
    for name, max_exts in analysis.offsets.items():
        b = next(x for x in op.inputs if x.name == name)
        nseg = _eval(b.shape[0], env, f"offsets input {name!r}") - 1
        bounds = [eval_int(e, env) for e in max_exts if _known(e, env)]
        max_len = min(bounds) if bounds else env.get("max_len", 8)
        dist = dist_over if isinstance(dist_over, str) else analysis.dists.get(name, "uniform")
        lens = jagged_lengths(rng, max(nseg, 0), max(max_len, 0), dist)
        out[name] = offsets_of(lens)
        for dim, off in analysis.totals.items():
            if off == name:
                env[dim] = int(out[name][-1])
    for b in op.inputs:
        if b.name in out:
            continue
        shp = tuple(_eval(s, env, f"input {b.name!r}") for s in b.shape)
        given = shape.get(b.name)
        if not shp and isinstance(given, (int, float)) and not isinstance(given, bool):
            out[b.name] = np.asarray(given, dtype=b.dtype.np)  # a scalar()'s value
            continue
        if b.dtype.kind == "bool":
            out[b.name] = rng.integers(0, 2, size=shp).astype(bool)
        elif b.dtype.is_int:
            dom = analysis.domains.get(b.name)
            if b.name in analysis.index_of:
                hi = _eval(analysis.index_of[b.name], env, f"the range of {b.name!r}")
                lo = 0
            elif dom is not None and (dom.lo is not None or dom.hi is not None):
                lo = int(dom.lo if dom.lo is not None else 0)
                hi = int(dom.hi if dom.hi is not None else lo + 16) + 1
            else:
                lo, hi = (1, 17) if dom is not None and (dom.positive or dom.nonzero) \
                    else (0, 16)
            v = rng.integers(lo, max(hi, lo + 1), size=shp, dtype=np.int64)
            if dom is not None and dom.nonzero and b.name not in analysis.index_of:
                if dom.lo is None and dom.hi is None and not dom.positive:
                    v = v * rng.choice(np.array([-1, 1]), size=shp)  # floor vs truncation
                else:  # within [lo, hi], never 0
                    values = np.arange(lo, max(hi, lo + 1), dtype=np.int64)
                    values = values[values != 0] if (values != 0).any() else np.ones(1, int)
                    v = rng.choice(values, size=shp)
            out[b.name] = v.astype(b.dtype.np)
        else:
            out[b.name] = as_dtype(_floats(rng, shp, analysis, b.name, env), b.dtype.name)
    params = {p.name: env[p.name] for p in op.params if p.name in env}
    missing = [p.name for p in op.params if p.name not in env]
    if missing:
        raise ShapeError(f"{op.name}: the shape does not give parameter {missing[0]!r}")
    return out, params


def _known(e: Expr, env: dict) -> bool:
    return all(n.name in env for n in walk(e) if isinstance(n, Dim))


def _floats(rng, shp, analysis: Analysis, name: str, env: dict) -> np.ndarray:
    dom = analysis.domains.get(name, Domain())
    if dom.lo is not None or dom.hi is not None:
        lo = dom.lo if dom.lo is not None else (dom.hi - 4.0)
        hi = dom.hi if dom.hi is not None else lo + 4.0
        if dom.positive:
            lo = max(lo, 1e-3)
        x = rng.uniform(lo, hi, size=shp)
    elif dom.positive:
        x = rng.uniform(0.1, 3.0, size=shp)
    elif dom.nonzero:
        x = rng.uniform(0.5, 2.0, size=shp) * rng.choice([-1.0, 1.0], size=shp)
    else:
        x = rng.standard_normal(shp)
        if name in analysis.scale and _known(analysis.scale[name], env):
            x = x * max(eval_int(analysis.scale[name], env), 1) ** -0.25
    if dom.integer:
        x = np.round(x)
    return x.astype(np.float32)


__all__ = ["LENGTH_DISTS", "Analysis", "Domain", "Lengths", "analyse", "as_dtype", "derive",
           "free_dims", "jagged_lengths", "offsets_of", "round_bf16"]
