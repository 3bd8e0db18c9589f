"""Pure application of moves: `apply(schedule, move, index) -> schedule`.

Legality layers 1 (schema) and 2 (semantics of the single move) live here; cross-stage
checks that need the whole schedule run in `lower`, and backend limits in each backend."""

from __future__ import annotations

import re
from dataclasses import replace

from ..ir.nodes import AxisRef, Load, Op, Reduce, op_dims, walk, walk_stage
from .errors import MoveError
from .moves import MOVES
from .rfactor import split_reduction
from .state import LoopAxis, Schedule, StageSched, initial
from .trace import Trace


def check_schema(d: dict, i: int) -> None:
    spec = MOVES.get(d.get("m")) if isinstance(d.get("m"), str) else None
    if spec is None:
        raise MoveError(i, "schema.unknown_move", f"unknown move {d.get('m')!r}",
                        f"use one of: {', '.join(MOVES)}")
    for k in d:
        if k != "m" and k not in spec.args:
            raise MoveError(i, "schema.unknown_arg", f"{spec.name} has no argument {k!r}",
                            f"arguments: {', '.join(spec.args)}")
    for k in spec.required:
        if k not in d:
            raise MoveError(i, "schema.missing_arg", f"{spec.name} needs {k!r}",
                            f"add \"{k}\": ... ({spec.doc})")
    for k, v in d.items():
        if k == "m":
            continue
        _check_type(i, spec.name, k, v, spec.args[k])


def _check_type(i: int, move: str, k: str, v, sch: dict) -> None:
    t = sch.get("type")
    bad = None
    if t == "string":
        if not isinstance(v, str) or not v:
            bad = "a non-empty string"
        elif "enum" in sch and v not in sch["enum"]:
            raise MoveError(i, "schema.bad_value", f"{move}.{k} = {v!r} is not allowed",
                            f"use one of {sch['enum']}")
        elif len(v) > sch.get("maxLength", 1 << 30):
            bad = "a short name"
        elif "pattern" in sch and not re.fullmatch(sch["pattern"], v):
            bad = "a name of letters, digits and _"
    elif t == "integer":
        if isinstance(v, bool) or not isinstance(v, int):
            bad = "an integer"
        elif not sch.get("minimum", v) <= v <= sch.get("maximum", v):
            raise MoveError(i, "schema.bad_value", f"{move}.{k} = {v} is out of range",
                            f"use {sch['minimum']}..{sch['maximum']}")
        elif sch.get("pow2") and v & (v - 1):
            raise MoveError(i, "schema.not_pow2", f"{move}.{k} = {v} is not a power of two",
                            f"try {1 << (v.bit_length() - 1)} or {1 << v.bit_length()}")
    elif t == "array":
        items = sch.get("items", {})
        most, pat = items.get("maxLength", 1 << 30), items.get("pattern")
        if not isinstance(v, (list, tuple)) or not all(
                isinstance(x, str) and 0 < len(x) <= most and (not pat or re.fullmatch(pat, x))
                for x in v):
            bad = "a list of short names (letters, digits, _)"
        elif not sch.get("minItems", 0) <= len(v) <= sch.get("maxItems", 1 << 30):
            raise MoveError(i, "schema.bad_value", f"{move}.{k} has {len(v)} items",
                            f"give {sch.get('minItems')}..{sch.get('maxItems', 'any')} names")
    if bad:
        raise MoveError(i, "schema.bad_type", f"{move}.{k} must be {bad}, got {v!r}", "")


def _stage(s: Schedule, name: str, i: int) -> StageSched:
    try:
        return s.stage(name)
    except KeyError:
        raise MoveError(i, "schema.unknown_stage", f"no stage {name!r}",
                        f"stages: {', '.join(x.name for x in s.stages)}") from None


def _loop(st: StageSched, name: str, i: int) -> LoopAxis:
    lp = st.loop(name)
    if lp is None:
        raise MoveError(i, "schema.unknown_axis", f"stage {st.name!r} has no loop axis "
                        f"{name!r}", f"axes: {', '.join(x.name for x in st.loops)}")
    return lp


def _set_loop(st: StageSched, new: LoopAxis, old: str) -> StageSched:
    return replace(st, loops=tuple(new if lp.name == old else lp for lp in st.loops))


def apply(s: Schedule, d: dict, i: int) -> Schedule:
    """Apply one resolved move (a dict) at trace position `i`."""
    check_schema(d, i)
    m = d["m"]
    if m == "launch":
        out = replace(s, num_warps=d.get("num_warps", s.num_warps),
                      num_stages=d.get("num_stages", s.num_stages),
                      group_m=d.get("group_m", s.group_m),
                      dot_precision=d.get("dot_precision", s.dot_precision),
                      constexpr_dims=_constexpr_dims(s, d, i),
                      persistent=d.get("persistent", s.persistent),
                      pipeline=d.get("pipeline", s.pipeline))
        if out.pipeline == "across_tiles" and not out.persistent:
            raise MoveError(i, "semantics.pipeline_persistent", "pipeline 'across_tiles' "
                            "needs persistent programs: one program per tile has no next "
                            "tile to load", "add \"persistent\": 1 to this launch move (or "
                            "an earlier one), or drop pipeline")
        return out
    st = _stage(s, d["stage"], i)
    op = s.op
    if m not in ("inline", "compute_at") and st.placement == "inline":
        raise MoveError(i, "semantics.inlined", f"stage {st.name!r} is inlined and has no "
                        "loops of its own", "schedule its consumer instead")
    if m == "reduction" and d["strategy"] == "split":
        _reduction(op, st, d, i)  # its checks
        return split_reduction(s, st, d["factor"], i)
    return s.with_stage(_APPLY[m](op, st, d, i))


def _constexpr_dims(s: Schedule, d: dict, i: int) -> tuple[str, ...]:
    """The dims to compile in, in the op's order (so equal sets give equal source)."""
    if "constexpr_dims" not in d:
        return s.constexpr_dims
    names = op_dims(s.op)
    for n in d["constexpr_dims"]:
        if n not in names:
            raise MoveError(i, "semantics.unknown_dim", f"launch.constexpr_dims names {n!r}, "
                            f"which is not a dim of op {s.op.name!r}",
                            f"dims: {', '.join(names) or '(none)'}")
    return tuple(n for n in names if n in d["constexpr_dims"])


def _split(op: Op, st: StageSched, d: dict, i: int) -> StageSched:
    lp = _loop(st, d["axis"], i)
    if lp.part != "whole":
        raise MoveError(i, "semantics.split_twice", f"{lp.name!r} is already split or fused",
                        "split an axis once; change the tile size instead")
    outer, inner = d.get("into") or (f"{lp.name}o", f"{lp.name}i")
    taken = {x.name for x in st.loops} - {lp.name}
    taken |= {a.name for a in op.stage(st.name).axes + op.stage(st.name).reduce_axes}
    taken -= set(lp.origin)
    for n in (outer, inner):
        if n in taken or outer == inner:
            raise MoveError(i, "semantics.name_taken", f"axis name {n!r} is already used in "
                            f"stage {st.name!r}", "pick fresh names in into")
    tail = d.get("tail", "mask")
    ax = op.stage(st.name).axis(lp.origin[0]) if len(lp.origin) == 1 else None
    if tail == "guard" and ax is not None and ax.is_jagged:
        raise MoveError(i, "semantics.jagged_guard", f"jagged axis {lp.name!r} cannot be "
                        "split with a guard (segment lengths vary)", 'use "tail": "mask"')
    o = replace(lp, name=outer, part="outer", size=None, vector=None, unroll=None)
    n = replace(lp, name=inner, part="inner", size=d["size"], tail=tail, bind=None,
                vector=None, unroll=None)
    loops = []
    for x in st.loops:
        loops.extend((o, n) if x.name == lp.name else (x,))
    return replace(st, loops=tuple(loops))


def _reorder(op: Op, st: StageSched, d: dict, i: int) -> StageSched:
    order = list(d["order"])
    for n in order:
        _loop(st, n, i)
    if len(set(order)) != len(order):
        raise MoveError(i, "schema.duplicate", "reorder names an axis twice", "")
    slots = [k for k, lp in enumerate(st.loops) if lp.name in order]
    loops = list(st.loops)
    by = {lp.name: lp for lp in st.loops}
    for k, n in zip(slots, order):
        loops[k] = by[n]
    for k, a in enumerate(loops):  # any later loop, not only the next one
        for b in loops[k + 1:]:
            if a.origin == b.origin and a.part == "inner" and b.part == "outer":
                raise MoveError(i, "semantics.tile_order", f"tile {a.name!r} would run "
                                f"outside its outer loop {b.name!r}", "keep outer before inner")
    return replace(st, loops=tuple(loops))


def _fuse(op: Op, st: StageSched, d: dict, i: int) -> StageSched:
    a, b = (_loop(st, n, i) for n in d["axes"])
    names = [lp.name for lp in st.loops]
    if names.index(b.name) != names.index(a.name) + 1:
        raise MoveError(i, "semantics.not_adjacent", f"{a.name!r} and {b.name!r} are not "
                        "adjacent", "reorder them next to each other first")
    for lp in (a, b):
        if lp.kind != "spatial" or lp.part != "whole":
            raise MoveError(i, "semantics.fuse", f"{lp.name!r} is not a whole spatial axis",
                            "fuse before splitting; reduce axes cannot be fused")
        ax = op.stage(st.name).axis(lp.origin[0])
        if ax.is_jagged:
            raise MoveError(i, "semantics.fuse_jagged", f"{lp.name!r} is jagged",
                            "fuse only rectangular axes")
    into = d.get("into") or f"{a.name}{b.name}"
    if into in names and into not in (a.name, b.name):
        raise MoveError(i, "semantics.name_taken", f"axis name {into!r} is taken", "")
    f = LoopAxis(into, a.origin + b.origin, "spatial", "fused")
    loops = []
    for lp in st.loops:
        if lp.name == a.name:
            loops.append(f)
        elif lp.name != b.name:
            loops.append(lp)
    return replace(st, loops=tuple(loops))


def _bind(op: Op, st: StageSched, d: dict, i: int) -> StageSched:
    lp = _loop(st, d["axis"], i)
    if lp.kind == "reduce":
        raise MoveError(i, "semantics.parallel_reduce", f"cannot bind reduce axis "
                        f"{lp.name!r} to {d['to']}", 'use {"m": "reduction", "strategy": '
                        '"split"} to parallelize a reduction')
    if d["to"] == "grid" and lp.part == "inner":
        raise MoveError(i, "semantics.bind_tile", f"{lp.name!r} is a tile; tiles run inside "
                        "one program", "bind the outer axis of the split")
    return _set_loop(st, replace(lp, bind=d["to"]), lp.name)


def _vectorize(op: Op, st: StageSched, d: dict, i: int) -> StageSched:
    lp = _loop(st, d["axis"], i)
    w = d["width"]
    if lp.kind == "reduce" and st.reduction == "auto":
        raise MoveError(i, "semantics.vector_reduce", f"vectorizing reduce axis {lp.name!r} "
                        "needs a combine strategy", 'set {"m": "reduction", ...} first')
    if lp.part == "inner" and lp.size % w:
        raise MoveError(i, "semantics.vector_width", f"width {w} does not divide tile "
                        f"{lp.name!r} of {lp.size}", f"use a width dividing {lp.size}")
    if lp.bind == "grid":
        raise MoveError(i, "semantics.vector_grid", f"{lp.name!r} is bound to the grid",
                        "vectorize a tile axis")
    return _set_loop(st, replace(lp, vector=w), lp.name)


def _unroll(op: Op, st: StageSched, d: dict, i: int) -> StageSched:
    lp = _loop(st, d["axis"], i)
    if d["factor"] > 64:
        raise MoveError(i, "semantics.unroll", f"unroll factor {d['factor']} is too large",
                        "use at most 64")
    return _set_loop(st, replace(lp, unroll=d["factor"]), lp.name)


def _inline(op: Op, st: StageSched, d: dict, i: int) -> StageSched:
    s = op.stage(st.name)
    _placeable(op, st, i)
    if any(isinstance(n, Reduce) for n in walk(s.body)):
        raise MoveError(i, "semantics.inline_reduce", f"stage {st.name!r} reduces; inlining "
                        "would recompute the reduction per consumer point",
                        f'use {{"m": "compute_at", "stage": "{st.name}", "at": [consumer, '
                        'axis]}')
    if s.store is not None:
        raise MoveError(i, "semantics.inline_store", f"stage {st.name!r} stores through an "
                        "index map", "compute it at its consumer instead")
    return replace(st, placement="inline", at=None, placed_by=i)


def _placeable(op: Op, st: StageSched, i: int) -> None:
    if op.stage(st.name).accumulate is not None:
        raise MoveError(i, "semantics.accumulate", f"stage {st.name!r} accumulates (its "
                        "points add into shared elements of its buffer), so it runs as a "
                        "kernel of its own that every reader waits for",
                        f"leave {st.name!r} at root; schedule its loops or its producers")
    if st.name in op.outputs:
        raise MoveError(i, "semantics.output", f"stage {st.name!r} is an output and must be "
                        "stored", "schedule its producers instead")
    if not op.consumers(st.name):
        raise MoveError(i, "semantics.no_consumer", f"nothing reads {st.name!r}", "")


def _compute_at(op: Op, st: StageSched, d: dict, i: int) -> StageSched:
    if st.name not in op.outputs:
        _placeable(op, st, i)
    cons, ax = d["at"]
    if cons == st.name:
        raise MoveError(i, "semantics.compute_at_self", "a stage cannot be computed at itself",
                        "name a consumer")
    try:
        c = op.stage(cons)
    except KeyError:
        raise MoveError(i, "schema.unknown_stage", f"no stage {cons!r}", "") from None
    reads = any(isinstance(n, Load) and n.buffer.name == st.name for n in walk_stage(c)) or \
        _reads_through_inline(op, c, st.name)
    if not reads and st.name in op.outputs:
        _sibling(op, op.stage(st.name), c, i)
    elif not reads:
        raise MoveError(i, "semantics.not_consumer", f"{cons!r} does not read {st.name!r}",
                        f"consumers: {', '.join(x.name for x in op.consumers(st.name))}")
    for n in walk_stage(c):
        if isinstance(n, Load) and n.buffer.name == st.name:
            names = [x.axis.name for x in n.index if isinstance(x, AxisRef)]
            if len(names) != len(n.index) or len(set(names)) != len(names) or \
                    any(c.axis(x).kind != "spatial" for x in names):
                if st.name in op.outputs:
                    raise MoveError(i, "semantics.output_space", f"compute_at of output "
                                    f"{st.name!r} at {cons!r}: {cons!r} reads it at "
                                    f"[{', '.join(_idx(x) for x in n.index)}], over its "
                                    "reduce axes or at computed indices, so its programs "
                                    f"do not iterate over the points of {st.name!r}",
                                    f"compute {st.name!r} at a stage that reads it at its "
                                    "own spatial axes, or leave it at root")
                raise MoveError(i, "semantics.compute_at_index", f"{cons!r} reads "
                                f"{st.name!r} at computed indices", "compute_at needs the "
                                "consumer to read the producer at its own spatial axes; "
                                "leave the producer at root")
    return replace(st, placement="at", at=(cons, ax), placed_by=i)


def _idx(e) -> str:
    return e.axis.name if isinstance(e, AxisRef) else "..."


def _sibling(op: Op, prod, c, i: int) -> None:
    """An output computed at a stage that does not read it (a sibling output over the same
    points): each of its axes must be an axis of that stage, same name and same bounds."""
    for a in prod.axes:
        try:
            b = c.axis(a.name)
        except KeyError:
            b = None
        if b is None or b.kind != "spatial" or (a.start, a.extent, a.max_extent) != \
                (b.start, b.extent, b.max_extent):
            raise MoveError(i, "semantics.output_space", f"compute_at of output "
                            f"{prod.name!r} at {c.name!r}: {c.name!r} does not read it, and "
                            f"its axes do not cover axis {a.name!r} of {prod.name!r} with the "
                            "same bounds, so its programs would not store every point",
                            f"compute {prod.name!r} at a stage whose spatial axes are "
                            f"{', '.join(x.name for x in prod.axes)} with the same bounds")


def _reads_through_inline(op: Op, c, name: str) -> bool:
    for p in op.producers(c):
        if any(isinstance(n, Load) and n.buffer.name == name for n in walk_stage(p)):
            return True
    return False


def _cache(op: Op, st: StageSched, d: dict, i: int) -> StageSched:
    s = op.stage(st.name)
    buf, copy = d["buffer"], d.get("copy", "threads")
    own = buf == s.out.name
    if own and (copy != "bulk" or d["scope"] != "shared"):
        raise MoveError(i, "semantics.cache_output", f"stage {st.name!r} writes {buf!r}: "
                        "a stage's own output is cached only to be written in bulk",
                        "add \"scope\": \"shared\", \"copy\": \"bulk\", or cache a buffer "
                        "the stage reads")
    if not own and not any(isinstance(n, Load) and n.buffer.name == buf
                           for n in walk_stage(s)):
        raise MoveError(i, "semantics.cache_unread", f"stage {st.name!r} does not read "
                        f"{buf!r}", "cache a buffer the stage loads, or its own output "
                        f"({s.out.name!r}) to write it in bulk")
    if own and s.accumulate is not None:
        raise MoveError(i, "semantics.accumulate", f"stage {st.name!r} accumulates into "
                        f"{buf!r}: its adds go to memory one by one (atomics), not as a "
                        "tile written in bulk", "cache a buffer the stage reads instead")
    if copy == "bulk" and d["scope"] != "shared":
        raise MoveError(i, "semantics.bulk_scope", f"a bulk copy of {buf!r} is into "
                        f"shared memory, not {d['scope']!r}", "use scope 'shared' with copy "
                        "'bulk', or drop copy")
    if "parts" in d and not own:
        raise MoveError(i, "semantics.cache_parts", f"parts applies to a bulk write of the "
                        f"stage's own output ({s.out.name!r}), not to {buf!r}", "drop parts")
    caches = tuple(c for c in st.caches if c[0] != buf) + ((buf, d["scope"], copy),)
    by = tuple(c for c in st.cache_by if c[0] != buf) + ((buf, i),)
    parts = d.get("parts", 1) if own else st.store_parts
    return replace(st, caches=caches, cache_by=by, store_parts=parts)


def _prefetch(op: Op, st: StageSched, d: dict, i: int) -> StageSched:
    s = op.stage(st.name)
    gathers = [n for n in walk_stage(s) if isinstance(n, Load) and n.buffer.name == d["buffer"]
               and any(isinstance(x, Load) for e in n.index for x in walk(e))]
    if not gathers:
        raise MoveError(i, "semantics.prefetch_not_gather", f"stage {st.name!r} does not "
                        f"gather from {d['buffer']!r} (no load of it through an index "
                        "load)", "prefetch a buffer read as table[indices[l], d]")
    if d.get("distance", 8) > 256:
        raise MoveError(i, "schema.bad_value", "prefetch distance over 256",
                        "use a distance of a few to a few dozen iterations")
    pf = tuple(p for p in st.prefetch if p[0] != d["buffer"]) + \
        ((d["buffer"], d.get("distance", 8)),)
    return replace(st, prefetch=pf)


def _reduction(op: Op, st: StageSched, d: dict, i: int) -> StageSched:
    if not any(lp.kind == "reduce" for lp in st.loops):
        raise MoveError(i, "semantics.no_reduction", f"stage {st.name!r} does not reduce",
                        "set the strategy on a stage with sum_/max_/min_")
    strat = d["strategy"]
    if strat == "split" and "factor" not in d:
        raise MoveError(i, "schema.missing_arg", "split reduction needs a factor",
                        'add "factor": 4')
    return replace(st, reduction=strat, reduction_by=i, split_factor=d.get("factor"))


_APPLY = {"split": _split, "reorder": _reorder, "fuse": _fuse, "bind": _bind,
          "vectorize": _vectorize, "unroll": _unroll, "inline": _inline,
          "compute_at": _compute_at, "cache": _cache, "reduction": _reduction,
          "prefetch": _prefetch}


def apply_trace(op: Op, trace: Trace) -> Schedule:
    """Replay a trace from the initial schedule. Raises the first MoveError met."""
    if trace.op and trace.op != op.name:
        raise MoveError(None, "schema.wrong_op", f"trace is for {trace.op!r}, not {op.name!r}",
                        "use a trace written for this op")
    s = initial(op)
    for i, d in enumerate(trace.resolved()):
        s = apply(s, d, i)
    return s
