"""A reduction split across programs (`reduction` strategy `split`): the stage's reduction
is rewritten into two stages, so every backend lowers it with what it already has.

    s[i] = f(sum_k body(i, k))          becomes
    s_rf[i, kp] = sum_{k in chunk kp} body(i, k)      (factor chunks: one program each)
    s[i] = f(sum_kp s_rf[i, kp])

(over several axes, the first is chunked and the others are reduced whole in each chunk)

Chunk `kp` of `factor` covers `[start + min(kp*C, K), start + min(kp*C + C, K))` with
`C = ceil(K / factor)`: a jagged reduce axis whose bounds depend on `kp`, so the tile
lowering loops over it as over an FBGEMM segment. Without it, a reduction over a whole
tensor (a loss to a scalar) or down a long column runs in one program per output, a few
programs on a machine of a hundred multiprocessors. `sum`, `max`, `min` and `prod`
recombine exactly this way; the partials keep f32 where the stage stores 16-bit floats.

`s_rf` is a stage of its own (a root: its own kernel on tile backends), scheduled by later
moves under its name; it starts with the loops the stage had (its spatial loops, with
their splits and grid binds, and the reduce axes' loops, with their tiles), plus `kp` on
the grid after the stage's own grid loops. The stage keeps its spatial loops and reduces
over `kp` in one tile."""

from __future__ import annotations

from dataclasses import replace

from ..ir import dtypes as dt
from ..ir.nodes import (
    REDUCE,
    SPATIAL,
    Axis,
    AxisRef,
    Binary,
    Buffer,
    Compute,
    Const,
    Load,
    Op,
    Reduce,
    rebuild,
    substitute_axes,
    walk,
)
from .errors import MoveError
from .state import LoopAxis, Schedule, StageSched

SUFFIX = "_rf"


def why_not(op: Op, stage: Compute) -> tuple[str, str] | None:
    """Why `stage` cannot be split (what, and what to do), or None where it can."""
    if stage.store is not None or stage.accumulate is not None:
        return ("it stores through an index (or accumulates)",
                "split a stage that writes its own axes")
    reds = [n for n in walk(stage.body) if isinstance(n, Reduce)]
    if len(reds) != 1:
        return (f"it has {len(reds)} reductions", "split a stage with one reduction (give "
                "each reduction a stage of its own)")
    if any(isinstance(n, Reduce) for n in walk(reds[0].body)):
        return "its reduction nests another", "split the inner one's stage"
    taken = {x.name for x in op.stages} | {b.name for b in op.inputs}
    name, kp = stage.name + SUFFIX, reds[0].axes[0].name + "p"
    if name in taken or kp in {a.name for a in stage.axes}:
        return f"{name!r} or axis {kp!r} is taken", "rename the stage or axis"
    return None


def partial_stages(stage: Compute, factor: int) -> tuple[Compute, Compute]:
    """(the partial stage `NAME_rf`, the stage combining its results) for a stage that
    `why_not` accepts."""
    red = next(n for n in walk(stage.body) if isinstance(n, Reduce))
    k = red.axes[0]  # the chunked axis; the others stay whole in each chunk's program
    kp_name = k.name + "p"
    kp = Axis(kp_name, Const(factor))
    chunk = (k.bound + Const(factor - 1)) // Const(factor)
    lo = Binary("min", AxisRef(kp) * chunk, k.extent)
    hi = Binary("min", AxisRef(kp) * chunk + chunk, k.extent)
    kc = Axis(k.name, hi - lo, k.start + lo, REDUCE, chunk, loc=k.loc)
    body = substitute_axes(red.body, {k.name: AxisRef(kc)})
    out_t = stage.out.dtype
    part_t = dt.f32 if out_t.is_float and out_t.bits < 32 else out_t
    name = stage.name + SUFFIX
    part = Compute(name, stage.axes + (kp,), Reduce(red.op, body, (kc,) + red.axes[1:]),
                   Buffer(name, stage.out.shape + (Const(factor),), part_t), loc=stage.loc)
    kr = Axis(kp_name, Const(factor), Const(0), REDUCE)
    combine = Reduce(red.op, Load(part.out, tuple(AxisRef(a) for a in stage.axes) +
                                  (AxisRef(kr),), source=part), (kr,))
    return part, replace(stage, body=rebuild(stage.body,
                                             lambda n: combine if n == red else None))


def split_reduction(s: Schedule, st: StageSched, factor: int, i: int) -> Schedule:
    """`s` with stage `st`'s reduction split over `factor` programs (see the module)."""
    op = s.op
    stage = op.stage(st.name)
    if not isinstance(factor, int) or factor < 2:
        raise MoveError(i, "schema.bad_value", f"split factor {factor!r}",
                        'give "factor": 2 or more (the number of partial results)')
    why = why_not(op, stage)
    if why is not None:
        raise MoveError(i, "semantics.split_reduction", f"stage {st.name!r}: {why[0]}",
                        why[1])
    part, combined = partial_stages(stage, factor)
    name, kp_name = part.name, part.axes[-1].name
    stages = []
    for x in op.stages:
        if x.name == st.name:
            stages += [part, combined]
        else:
            stages.append(x)
    new_op = replace(op, stages=tuple(stages))
    spatial = tuple(lp for lp in st.loops if lp.kind == SPATIAL)
    k_loops = tuple(lp for lp in st.loops if lp.kind == REDUCE)
    n_grid = next((n for n, lp in enumerate(spatial) if lp.bind != "grid"), len(spatial))
    part_sched = StageSched(name, spatial[:n_grid] + (LoopAxis(kp_name, (kp_name,), SPATIAL,
                                                               bind="grid"),)
                            + spatial[n_grid:] + k_loops)
    own = replace(st, loops=spatial + (LoopAxis(kp_name, (kp_name,), REDUCE),),
                  reduction="auto", reduction_by=None, split_factor=None)
    scheds = []
    for x in s.stages:
        scheds += [part_sched, own] if x.name == st.name else [x]
    return replace(s, op=new_op, stages=tuple(scheds))
