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
    Reduce,
    rebuild,
    substitute_axes,
    walk,
)
from .errors import MoveError
from .state import LoopAxis, Schedule, StageSched

SUFFIX = "_rf"


def _fail(i: int, st: str, why: str, fix: str) -> MoveError:
    return MoveError(i, "semantics.split_reduction", f"stage {st!r}: {why}", fix)


def split_reduction(s: Schedule, st: StageSched, factor: int, i: int) -> Schedule:
    """`s` with stage `st`'s reduction split over `factor` programs (see the module)."""
    op = s.op
    stage = op.stage(st.name)
    if not isinstance(factor, int) or factor < 2:
        raise MoveError(i, "schema.bad_value", f"split factor {factor!r}",
                        'give "factor": 2 or more (the number of partial results)')
    if stage.store is not None or stage.accumulate is not None:
        raise _fail(i, st.name, "it stores through an index (or accumulates)",
                    "split a stage that writes its own axes")
    reds = [n for n in walk(stage.body) if isinstance(n, Reduce)]
    if len(reds) != 1:
        raise _fail(i, st.name, f"it has {len(reds)} reductions", "split a stage with one "
                    "reduction (give each reduction a stage of its own)")
    red = reds[0]
    k = red.axes[0]  # the chunked axis; the others stay whole in each chunk's program
    if any(isinstance(n, Reduce) for n in walk(red.body)):
        raise _fail(i, st.name, "its reduction nests another", "split the inner one's stage")
    taken = {x.name for x in op.stages} | {b.name for b in op.inputs}
    name = st.name + SUFFIX
    kp_name = k.name + "p"
    if name in taken or kp_name in {a.name for a in stage.axes}:
        raise _fail(i, st.name, f"{name!r} or axis {kp_name!r} is taken",
                    "rename the stage or axis")
    kp = Axis(kp_name, Const(factor))
    ext = k.bound
    chunk = (ext + Const(factor - 1)) // Const(factor)
    lo = Binary("min", AxisRef(kp) * chunk, k.extent)
    hi = Binary("min", AxisRef(kp) * chunk + chunk, k.extent)
    kc = Axis(k.name, hi - lo, k.start + lo, REDUCE, chunk, loc=k.loc)
    body = substitute_axes(red.body, {k.name: AxisRef(kc)})
    out_t = stage.out.dtype
    part_t = dt.f32 if out_t.is_float and out_t.bits < 32 else out_t
    part_axes = stage.axes + (kp,)
    part = Compute(name, part_axes, Reduce(red.op, body, (kc,) + red.axes[1:]),
                   Buffer(name, stage.out.shape + (Const(factor),), part_t), loc=stage.loc)
    kr = Axis(kp_name, Const(factor), Const(0), REDUCE)
    combine = Reduce(red.op, Load(part.out, tuple(AxisRef(a) for a in stage.axes) +
                                  (AxisRef(kr),), source=part), (kr,))
    new_body = rebuild(stage.body, lambda n: combine if n == red else None)
    stages = []
    for x in op.stages:
        if x.name == st.name:
            stages += [part, replace(x, body=new_body)]
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
