"""Lowering: a Schedule plus a shape class (bound dims) becomes a Plan of kernels.

Every root stage (not inlined, not computed at a consumer) becomes one kernel. Its grid
loops must be outermost; its other spatial loops are sequential loops or blocks; producers
computed at it become steps inside the program. Cross-stage legality (the second layer,
for what one move alone cannot decide) is checked here and reported as MoveErrors."""

from __future__ import annotations

from dataclasses import replace

from ..ir import prefix, printer
from ..ir.interp import InterpError, eval_int
from ..ir.nodes import (
    Axis,
    AxisRef,
    Binary,
    Buffer,
    Cast,
    Compute,
    Const,
    Expr,
    Load,
    Op,
    Reduce,
    Unary,
    dtype_of,
    rebuild,
    substitute_axes,
    walk,
)
from ..schedule.defaults import p2
from ..schedule.errors import MoveError
from ..schedule.state import Schedule, StageSched
from .model import AxisMap, KernelPlan, Plan, PLoop, Step


def effective_bodies(sched: Schedule) -> dict[str, Expr]:
    """Each stage's body with inlined producers substituted (recursively)."""
    op = sched.op
    inl = {s.name for s in sched.stages if s.placement == "inline"}
    out: dict[str, Expr] = {}
    for s in op.stages:
        def sub(n: Expr) -> Expr | None:
            if isinstance(n, Load) and n.buffer.name in inl:
                prod = op.stage(n.buffer.name)
                return substitute_axes(out[prod.name], {a.name: i for a, i in
                                                        zip(prod.axes, n.index)})
            return None
        out[s.name] = rebuild(s.body, sub)
    return out


def _reads(body: Expr, name: str) -> list[Load]:
    return [n for n in walk(body) if isinstance(n, Load) and n.buffer.name == name]


def _bound(a: Axis, dims: dict[str, int]) -> int:
    return eval_int(a.bound, dims)


def lower(sched: Schedule, dims: dict[str, int]) -> Plan:
    op = sched.op
    bodies = effective_bodies(sched)
    roots = [s for s in sched.stages if s.placement == "root"]
    at = [s for s in sched.stages if s.placement == "at"]
    root_names = {s.name for s in roots}
    for s in at:
        if s.at[0] not in root_names:
            raise MoveError(s.placed_by, "semantics.nested_compute_at", f"{s.name!r} is "
                            f"computed at {s.at[0]!r}, which is not itself a kernel root",
                            "compute both producers at the same root stage")
    kernels = []
    for r in roots:
        if op.stage(r.name).accumulate is not None:
            kernels.append(zero_kernel(op.stage(r.name), dims))
        kernels.append(_kernel(sched, op, r, [s for s in at if s.at[0] == r.name], bodies,
                               dims, [x.name for x in roots]))
    scratch = tuple(r.name for r in roots if r.name not in op.outputs)
    return Plan(op, tuple(kernels), scratch, tuple(sorted(dims.items())))


ZERO_BLOCK = 1024  # elements one program of a zeroing kernel clears


def zero_kernel(stage: Compute, dims: dict[str, int]) -> KernelPlan:
    """The kernel that sets an accumulating stage's buffer to 0 before the stage adds into
    it: the buffer as one flat axis `z`, in tiles of up to ZERO_BLOCK on the grid. Every
    backend renders it as an ordinary pointwise kernel, and kernels run in plan order, so
    every launcher (and a second call on the same buffers) starts from zeros."""
    out = stage.out
    numel: Expr = Const(1)
    for e in out.shape:
        numel = e if numel == Const(1) else Binary("mul", numel, e)
    try:
        size = min(ZERO_BLOCK, p2(eval_int(numel, dims)))
    except InterpError:  # a size the shape class does not bind: the full tile, masked
        size = ZERO_BLOCK
    z = Axis("z", numel)
    flat = Buffer(out.name, (numel,), out.dtype)
    name = f"{stage.name}_zero"
    zs = Compute(name, (z,), Const(0 if out.dtype.is_int else 0.0, out.dtype), flat)
    loops = (PLoop("zo", ("z",), "grid"), PLoop("zi", ("z",), "block", size, 0))
    step = Step(zs, zs.body, None, (AxisMap(z, ("zo", "zi"), (size, 1), None, True),), (),
                (), "none", is_root=True)
    return KernelPlan(f"k_{name}", zs, loops, (step,), 1, (size,))


def _kernel(sched: Schedule, op: Op, rs: StageSched, steps_at: list[StageSched],
            bodies: dict[str, Expr], dims: dict[str, int],
            kernel_order: list[str]) -> KernelPlan:
    root = op.stage(rs.name)
    guards: list[tuple[Expr, str]] = []
    loops: list[PLoop] = []
    seen_nongrid = False
    pos = 0
    for lp in rs.loops:
        if lp.kind != "spatial":
            continue
        ax = root.axis(lp.origin[0])
        if lp.bind == "grid":
            if seen_nongrid:
                raise MoveError(None, "semantics.grid_order", f"grid axis {lp.name!r} of "
                                f"{rs.name!r} runs inside a non-grid loop",
                                f'reorder {rs.name!r} so grid axes come first')
            loops.append(PLoop(lp.name, lp.origin, "grid", lp.size, tail=lp.tail))
            continue
        seen_nongrid = True
        if lp.part == "fused":
            raise MoveError(None, "backend.fused_loop", f"fused loop {lp.name!r} of "
                            f"{rs.name!r} is not bound to the grid", "bind it to the grid")
        if lp.part == "outer":
            loops.append(PLoop(lp.name, lp.origin, "seq", unroll=lp.unroll))
            continue
        size = lp.size if lp.part == "inner" else p2(_bound(ax, dims))
        if lp.part == "whole" and not ax.is_jagged:
            guards.append((Binary("le", ax.extent, Const(size)), f"{rs.name}.{lp.name}: "
                           f"extent must fit one tile of {size}"))
        if lp.part == "whole" and ax.max_extent is not None:
            guards.append((Binary("le", ax.max_extent, Const(size)), f"{rs.name}.{lp.name}: "
                           f"max_extent must fit one tile of {size}"))
        loops.append(PLoop(lp.name, lp.origin, "block", size, pos, lp.tail, lp.vector,
                           lp.unroll, lp.bind))
        pos += 1
    maps = {a.name: _axis_map(rs, root.axis(a.name), loops, dims, guards) for a in root.axes}
    _check_loop_bounds(rs, root, loops)
    rank = pos
    pos_sizes = [lp.size for lp in loops if lp.role == "block"]

    order = [lp.name for lp in loops]
    steps: list[Step] = []
    kb = dict(bodies)  # bodies as this program computes them (see _from_registers)
    mapped: dict[str, dict[str, AxisMap]] = {rs.name: maps}
    placed = [s for s in sched.stages if s in steps_at]
    levels_: dict[str, PLoop] = {}
    # Consumers first: a producer's axes follow the root's loops through the root or
    # through a later step that reads it (mean read by var, var by rstd, rstd by y).
    for ps in reversed(placed):
        prod = op.stage(ps.name)
        level = ps.at[1]
        if level not in order and level not in {lp.name for lp in rs.loops}:
            raise MoveError(ps.placed_by, "schema.unknown_axis", f"{rs.name!r} has no loop "
                            f"{level!r}", f"loops: {', '.join(order)}")
        lvl = next((lp for lp in loops if lp.name == level), None)
        if lvl is None or lvl.role == "block":
            raise MoveError(ps.placed_by, "semantics.compute_at_block", f"{level!r} is a tile "
                            "of the consumer, not a loop", "compute at a grid or outer axis")
        pmap = _producer_map(op, prod, rs.name, mapped, bodies, ps.placed_by)
        if prod.name in op.outputs:
            _check_output_space(prod, root, maps, pmap, ps)
        for m in pmap.values():
            for ln in m.loops:
                lpl = next(x for x in loops if x.name == ln)
                if lpl.role == "seq" and order.index(ln) > order.index(level):
                    raise MoveError(ps.placed_by, "semantics.compute_at_level", f"{ps.name!r}"
                                    f" depends on loop {ln!r}, which runs inside {level!r}",
                                    f"compute it at [{rs.name!r}, {ln!r}]")
        mapped[ps.name] = pmap
        levels_[ps.name] = lvl
    for ps in placed:
        prod, lvl, pmap = op.stage(ps.name), levels_[ps.name], mapped[ps.name]
        kb[ps.name] = _from_registers(kb[ps.name], ps.name, pmap, steps, mapped, kb, sched)
        step = _step(ps, prod, kb, pmap, None if lvl.role == "grid" else lvl.name, loops,
                     dims, rank, False, root, guards)
        steps.append(replace(step, store_out=prod.name in op.outputs))
    inner_seq = [lp.name for lp in loops if lp.role == "seq"]
    kb[rs.name] = _from_registers(kb[rs.name], rs.name, maps, steps, mapped, kb, sched)
    steps.append(_step(rs, root, kb, maps, inner_seq[-1] if inner_seq else None, loops,
                       dims, rank, True, root, guards))
    _check_consumers(op, sched, rs, steps, bodies, kernel_order)
    _check_inputs_ready(sched, rs, steps, bodies, kernel_order)
    steps = _fold_online(sched, steps, bodies)
    steps[-1:] = _split_epilogue(rs, root, steps[-1], bodies, maps, loops, dims, rank, guards,
                                 {s.name for s in op.stages})
    rank = max([rank] + [lp.pos + 1 for st in steps for lp in st.reduce_loops
                         if lp.pos is not None])
    return KernelPlan(f"k_{rs.name}", root, tuple(loops), tuple(steps), rank,
                      tuple(pos_sizes), sched.num_warps, sched.num_stages, sched.group_m,
                      tuple(guards), sched.dot_precision, sched.constexpr_dims,
                      sched.persistent, sched.pipeline)


def _tile_axes(root, loops: list[PLoop]) -> set[str]:
    return {n for lp in loops if lp.role == "block" for n in lp.origin}


def _check_loop_bounds(rs: StageSched, root, loops: list[PLoop]) -> None:
    """A loop over tiles needs one trip count per program: the bounds of a split axis may
    not vary across another axis' tile (a triangle, a jagged segment inside a tile)."""
    tiles = _tile_axes(root, loops)
    for lp in loops:
        if lp.role != "seq":
            continue
        ax = root.axis(lp.origin[0])
        deps = {n.axis.name for e in (ax.start, ax.extent) for n in walk(e)
                if isinstance(n, AxisRef)}
        if deps & tiles:
            raise MoveError(None, "semantics.split_varying", f"{rs.name}.{ax.name} is split "
                            f"into a loop, but its bounds vary across tile axis "
                            f"{sorted(deps & tiles)[0]!r}", f"keep {ax.name!r} whole, or bind "
                            f"{sorted(deps & tiles)[0]!r} to the grid first")


def _axis_map(st: StageSched, ax: Axis, loops: list[PLoop], dims, guards) -> AxisMap:
    mine = [lp for lp in loops if ax.name in lp.origin]
    if not mine:
        raise MoveError(None, "semantics.lost_axis", f"axis {ax.name!r} has no loop", "")
    if len(mine) == 1 and len(mine[0].origin) == 2:
        f = mine[0]
        return AxisMap(ax, (f.name,), (1,), (f.name, f.origin.index(ax.name)), False)
    strides = [_prod(x.size for x in mine[k + 1:] if x.size) for k in range(len(mine))]
    inner = mine[-1]
    if ax.is_jagged:
        masked = True
    elif inner.role == "grid" and len(mine) == 1:
        masked = False
    else:
        masked = not _exact(st.name, ax, inner.size, inner.tail == "guard", dims, guards)
    return AxisMap(ax, tuple(lp.name for lp in mine), tuple(strides), None, masked)


def _exact(where: str, ax: Axis, size: int, forced: bool, dims, guards) -> bool:
    """Drop the mask of a tiled rectangular axis when the shape class divides evenly (or the
    schedule demands it with a guard tail); the kernel then guards divisibility at launch.
    Constant trip counts are what let C compilers unroll and vectorize without epilogues."""
    if ax.is_jagged or ax.start != Const(0):
        return False
    if not forced and (eval_int(ax.extent, dims) % size or eval_int(ax.extent, dims) == 0):
        return False  # an empty axis keeps its mask: a tile of `size` would run anyway
    guards.append((Binary("eq", Binary("mod", ax.extent, Const(size)), Const(0)),
                   f"{where}.{ax.name}: extent must be a multiple of {size}"))
    return True


def _prod(xs) -> int:
    r = 1
    for x in xs:
        r *= x
    return r


def _producer_map(op: Op, prod, root: str, mapped, bodies, idx) -> dict[str, AxisMap]:
    """Map the producer's spatial axes onto the root's loops, through a stage that reads it
    at its own axes (the root, or another step already mapped)."""
    for reader, rmap in mapped.items():
        for ld in _reads(bodies[reader], prod.name):
            if all(isinstance(i, AxisRef) and i.axis.name in rmap for i in ld.index):
                # The load indexes the producer's buffer, whose dims are its store index
                # (its own axes unless it stores elsewhere, e.g. transposed or jagged).
                got = {si.axis.name: rmap[li.axis.name]
                       for si, li in zip(prod.store_index, ld.index)
                       if isinstance(si, AxisRef)}
                if all(pa.name in got for pa in prod.axes):
                    return {pa.name: _retarget(got[pa.name], pa) for pa in prod.axes}
    rmap = mapped[root]
    if prod.name in op.outputs and all(pa.name in rmap for pa in prod.axes):
        # a sibling output over the root's own axes (apply checked their bounds)
        return {pa.name: _retarget(rmap[pa.name], pa) for pa in prod.axes}
    raise MoveError(idx, "semantics.compute_at_index", f"no stage computed in {root!r} reads "
                    f"{prod.name!r} at its own axes", "compute it at the stage that reads it "
                    "(or at root)")


def _check_output_space(prod: Compute, root: Compute, maps: dict[str, AxisMap],
                        pmap: dict[str, AxisMap], ps: StageSched) -> None:
    """An output computed in another stage's program is stored from there: each of its axes
    must follow one of the root's axes over the same range, or some of its points would
    never be written (a consumer that reads only part of it) or be written out of range."""
    for pa in prod.axes:
        m = pmap[pa.name]
        ra = next((maps[a.name].axis for a in root.axes if (maps[a.name].loops,
                   maps[a.name].strides, maps[a.name].fused) == (m.loops, m.strides,
                                                                 m.fused)), None)
        if ra is None or (ra.start, ra.extent, ra.max_extent) != \
                (pa.start, pa.extent, pa.max_extent):
            where = f"axis {ra.name!r} of {root.name!r}" if ra is not None else \
                f"no axis of {root.name!r}"
            raise MoveError(ps.placed_by, "semantics.output_space", f"compute_at of output "
                            f"{prod.name!r} at {ps.at[0]!r}: its axis {pa.name!r} follows "
                            f"{where}, whose range differs, so the program would not store "
                            f"every point of {prod.name!r} exactly", f"compute {prod.name!r} "
                            "at a stage that iterates over the same points, or leave it at "
                            "root")


def _from_registers(body: Expr, reader: str, rmap: dict[str, AxisMap], steps: list[Step],
                    mapped: dict[str, dict[str, AxisMap]], kb: dict[str, Expr],
                    sched: Schedule) -> Expr:
    """A step reads an earlier step of its program from registers only where it reads it at
    the points that step computed (the same loops); elsewhere (over a reduce axis: the
    sum of squares of a residual that is also stored) a pointwise step is computed again
    from its inputs, as if inlined. A reducing step read elsewhere cannot be: refused."""
    earlier = {st.stage.name: st for st in steps}
    if not earlier:
        return body

    def fix(n: Expr) -> Expr | None:
        if not isinstance(n, Load) or n.buffer.name not in earlier:
            return None
        prod = earlier[n.buffer.name].stage
        pm = mapped[prod.name]
        got = {}
        for si, li in zip(prod.store_index, n.index):
            if isinstance(si, AxisRef) and isinstance(li, AxisRef) and li.axis.name in rmap:
                got[si.axis.name] = rmap[li.axis.name]
        if all(pa.name in got and (got[pa.name].loops, got[pa.name].strides,
                                   got[pa.name].fused) == (pm[pa.name].loops,
                                                           pm[pa.name].strides,
                                                           pm[pa.name].fused)
               for pa in prod.axes):
            return None
        pbody = kb[prod.name]
        if prod.store is not None or any(isinstance(x, Reduce) for x in walk(pbody)):
            raise MoveError(sched.stage(prod.name).placed_by, "semantics.compute_at_index",
                            f"{reader!r} reads {prod.name!r} as {printer.expr(n)}, not at "
                            f"the points {prod.name!r} is computed at in this program",
                            f"leave {prod.name!r} at root, or compute {reader!r} where it "
                            "reads those points")
        sub = substitute_axes(pbody, {a.name: i for a, i in zip(prod.axes, n.index)})
        return rebuild(sub, fix)
    return rebuild(body, fix)


def _retarget(m: AxisMap, a: Axis) -> AxisMap:
    return AxisMap(a, m.loops, m.strides, m.fused, m.masked)


def _step(ss: StageSched, stage, bodies, spatial: dict[str, AxisMap], level, loops, dims,
          rank: int, is_root: bool, stage_root, guards: list) -> Step:
    body = bodies[ss.name]
    if ss.reduction == "scan":
        return _scan_step(ss, stage, body, spatial, level, loops, is_root)
    blocks = {lp.name: lp for lp in loops if lp.role == "block"}
    used_pos = {blocks[ln].pos for m in spatial.values() for ln in m.loops if ln in blocks}
    dot = _is_dot(body, ss, spatial, blocks, rank, dims)
    red_loops: list[PLoop] = []
    red_maps: list[AxisMap] = []
    next_pos = rank
    for a in stage.reduce_axes:
        mine = [lp for lp in ss.loops if lp.kind == "reduce" and a.name in lp.origin]
        pls = []
        for lp in mine:
            if lp.part == "outer":
                pls.append(PLoop(lp.name, lp.origin, "seq", unroll=lp.unroll))
                continue
            size = lp.size if lp.part == "inner" else p2(_bound(a, dims))
            if lp.part == "whole":  # one tile holds the whole reduction: guard that
                guards.append((Binary("le", a.bound, Const(size)), f"{ss.name}.{a.name}: "
                               f"{'max_extent' if a.max_extent is not None else 'extent'} "
                               f"must fit one tile of {size}"))
            pos = None
            if not dot:
                pos = _reuse_pos(a, stage_root, loops, used_pos, dims)
                if pos is None:
                    pos, next_pos = next_pos, next_pos + 1
                used_pos.add(pos)
            pls.append(PLoop(lp.name, lp.origin, "block", size, pos, lp.tail, lp.vector,
                             lp.unroll))
        strides = tuple(_prod(x.size for x in pls[k + 1:] if x.size) for k in range(len(pls)))
        deps = {n.axis.name for e in (a.start, a.extent) for n in walk(e)
                if isinstance(n, AxisRef)}
        tiled = {name for name, m in spatial.items() if any(ln in blocks for ln in m.loops)}
        if any(p.role == "seq" for p in pls) and deps & tiled:
            raise MoveError(None, "semantics.split_varying", f"{ss.name}.{a.name} is split "
                            f"into a loop, but its bounds vary across tile axis "
                            f"{sorted(deps & tiled)[0]!r}", f"keep {a.name!r} whole, or "
                            "bind that axis to the grid first")
        red_loops.extend(pls)
        blk = pls[-1]
        masked = not _exact(ss.name, a, blk.size, blk.tail == "guard", dims, guards) \
            if blk.role == "block" else True
        red_maps.append(AxisMap(a, tuple(x.name for x in pls), strides, None, masked))
    strat = ss.reduction
    looped = any(lp.role == "seq" for lp in red_loops)
    if strat == "auto":
        strat = "looped" if looped else ("single" if red_loops else "none")
    elif strat == "single" and looped:
        raise MoveError(ss.reduction_by, "semantics.single_split", f"{ss.name!r} is split, so "
                        "it cannot reduce in a single tile", "drop the split or use looped")
    if strat == "online" and not isinstance(body, Reduce):
        raise MoveError(ss.reduction_by, "semantics.online", f"{ss.name!r} is not a plain "
                        "reduction", "online needs sum_(exp(x - max)) as the whole body")
    if dot and strat in ("single", "looped"):
        strat = "dot"
    return Step(stage, body, level, tuple(spatial[a.name] for a in stage.axes),
                tuple(red_loops), tuple(red_maps), strat, None, is_root, ss.prefetch,
                ss.caches, ss.store_parts)


def _scan_step(ss: StageSched, stage, body: Expr, spatial: dict[str, AxisMap], level,
               loops: list[PLoop], is_root: bool) -> Step:
    """A prefix reduction lowered as a running value along its axis: the axis' loops must
    run inside the program (its chunk loop, if split, is the one the step sits in, so the
    value carries from chunk to chunk), and the reduce axis has no loops of its own. Inside
    another axis' chunk loop, a scan over a whole tile of its axis starts afresh per chunk,
    which is right: each chunk holds other points."""
    idx = ss.reduction_by
    pre, why = prefix.match(stage, body)
    if pre is None:
        raise MoveError(idx, "semantics.scan", f"{ss.name!r} is not a prefix reduction: "
                        f"{why}", "a scan needs one sum_/prod_/max_/min_ over k in [0, j + 1)"
                        " (or [0, j), [j, N), [j + 1, N)) of a stage axis j, with a body "
                        "that reads j only through k; drop the reduction move to keep the "
                        "plain lowering")
    k = pre.reduce.axes[0].name
    if any(lp.kind == "reduce" and lp.part != "whole" for lp in ss.loops):
        raise MoveError(idx, "semantics.scan", f"{ss.name}.{k} is split, but a scan does not "
                        f"loop over {k!r}: it walks {pre.axis!r}", f"split {pre.axis!r} "
                        f"instead (its chunks are carried), and leave {k!r} whole")
    roles = {lp.name: lp.role for lp in loops}
    m = spatial[pre.axis]
    for ln in m.loops:
        if roles[ln] == "grid":
            raise MoveError(idx, "semantics.scan", f"scan axis {ss.name}.{pre.axis} is on the"
                            f" grid (loop {ln!r}); programs cannot carry a running value",
                            f"keep {pre.axis!r} inside the program (a block, or split with "
                            "its outer loop sequential) and bind the other axes to the grid")
        if roles[ln] == "seq" and ln != level:
            raise MoveError(idx, "semantics.scan", f"scan axis {ss.name}.{pre.axis} has the "
                            f"chunk loop {ln!r}, but {ss.name!r} is computed in "
                            f"{level or 'the program top'!r}", f"make {ln!r} the innermost "
                            "sequential loop (reorder), and compute the stage in it")
    return Step(stage, body, level, tuple(spatial[a.name] for a in stage.axes), (), (),
                "scan", None, is_root, ss.prefetch, ss.caches, ss.store_parts, pre)


def _epilogue_contraction(body: Expr) -> Reduce | None:
    """The one contraction sum_k(A * B) inside a body that does more than contract (a
    cast, a scale, a bias: an epilogue), or None."""
    if isinstance(body, Reduce):
        return None
    reds = [n for n in walk(body) if isinstance(n, Reduce)]
    if len(reds) != 1 or reds[0].op != "sum" or len(reds[0].axes) != 1:
        return None
    mul = reds[0].body
    if not (isinstance(mul, Binary) and mul.op == "mul" and isinstance(_strip(mul.a), Load)
            and isinstance(_strip(mul.b), Load)):
        return None
    return reds[0]


def _split_epilogue(rs: StageSched, root, st: Step, bodies, maps, loops, dims, rank: int,
                    guards: list, taken: set[str]) -> list[Step]:
    """A root `epilogue(sum_k A * B)` whose contraction a matrix unit can take becomes two
    steps, as if the contraction were a producer computed in the root's program: a `dot`
    step (an accumulator that never reaches memory), then the pointwise epilogue on it,
    fused before the store. Other roots stay one step."""
    r = _epilogue_contraction(st.body)
    if r is None or rs.reduction not in ("auto", "single", "looped") or st.online_max:
        return [st]
    blocks = {lp.name: lp for lp in loops if lp.role == "block"}
    if not _is_dot(r, rs, maps, blocks, rank, dims):
        return [st]
    name = f"{root.name}_acc"
    while name in taken:
        name += "_"
    axes = root.axes
    acc = Compute(name, axes, r, Buffer(name, tuple(a.bound for a in axes), dtype_of(r)))
    epi = Compute(root.name, axes, rebuild(st.body, lambda n: Load(
        acc.out, tuple(AxisRef(a) for a in axes)) if n == r else None), root.out, root.store,
        root.accumulate)
    more: list = []  # the guards these steps need are the ones the root step added
    dot = _step(replace(rs, name=name), acc, {name: r}, maps, st.level, loops, dims, rank,
                False, root, more)
    tail = _step(replace(rs, reduction="auto"), epi, {root.name: epi.body}, maps, st.level,
                 loops, dims, rank, True, root, more)
    guards += [g for g in more if g not in guards]
    own_out = tuple(c for c in st.caches if c[0] == root.name)
    return [replace(dot, caches=tuple(c for c in st.caches if c[0] != root.name),
                    prefetch=st.prefetch),
            replace(tail, caches=own_out, prefetch=())]


def _strip(x: Expr) -> Expr:
    return x.x if isinstance(x, Cast) and x.dtype.is_float else x


def _is_dot(body: Expr, ss: StageSched, spatial: dict[str, AxisMap], blocks, rank: int,
            dims) -> bool:
    """A contraction the tile backends can hand to a matrix unit: the whole body is
    sum_k(A * B), A spans block position 0 and k, B spans position 1 and k, tiles >= 16.
    With three block positions, the first is a batch both operands span (several samples
    per program, e.g. rows_per_program on a grid axis): A spans 0, 1 and k, B 0, 2 and k."""
    if rank not in (2, 3) or not isinstance(body, Reduce) or body.op != "sum" \
            or len(body.axes) != 1:
        return False
    mul = body.body
    if not isinstance(mul, Binary) or mul.op != "mul":
        return False
    a, b = _strip(mul.a), _strip(mul.b)
    if not (isinstance(a, Load) and isinstance(b, Load)):
        return False
    if not (a.buffer.dtype.is_float and b.buffer.dtype.is_float):
        return False  # an integer contraction accumulates exactly in int64, not in a dot
    k = body.axes[0].name
    kl = [lp for lp in ss.loops if lp.kind == "reduce" and k in lp.origin]
    ksize = next((lp.size if lp.part == "inner" else p2(_bound(body.axes[0], dims))
                  for lp in kl if lp.part != "outer"), 0)
    batch = rank - 2  # 0: no batch position; 1: position 0 is the batch
    if ksize < 16 or any(lp.size < 16 for lp in blocks.values() if lp.pos >= batch):
        return False
    positions = []
    for ld in (a, b):
        pos = set()
        for n in walk(ld):
            if isinstance(n, AxisRef) and n.axis.name in spatial:
                for ln in spatial[n.axis.name].loops:
                    if ln in blocks:
                        pos.add(blocks[ln].pos)
        names = {n.axis.name for n in walk(ld) if isinstance(n, AxisRef)}
        if batch:
            if 0 not in pos:
                return False
            pos.discard(0)
        if len(pos) != 1 or k not in names:
            return False
        positions.append(pos.pop())
    return sorted(positions) == [batch, batch + 1]


def _reuse_pos(a: Axis, root, loops: list[PLoop], used: set[int], dims) -> int | None:
    """Put a reduce block on a free root block position over a range of the same size (the
    row of a softmax), so its reduced value broadcasts against the root's tile."""
    want = _bound(a, dims)
    for lp in loops:
        if lp.role == "block" and lp.pos not in used and len(lp.origin) == 1 \
                and _bound(root.axis(lp.origin[0]), dims) == want:
            return lp.pos
    return None


def _check_consumers(op: Op, sched: Schedule, rs: StageSched, steps: list[Step], bodies,
                     kernel_order: list[str]):
    """Every reader of a computed-at producer must be computed in the same program, later;
    an output computed there may also be read from memory by a kernel launched later."""
    names = [s.stage.name for s in steps]
    later = kernel_order[kernel_order.index(rs.name) + 1:]
    for k, st in enumerate(steps[:-1]):
        ss = sched.stage(st.stage.name)
        for other in sched.stages:
            if other.placement == "inline" or other.name == st.stage.name:
                continue
            if _reads(bodies[other.name], st.stage.name):
                host = other.at[0] if other.placement == "at" else other.name
                if st.stage.name in op.outputs and host in later:
                    continue
                if other.name not in names[k + 1:]:
                    raise MoveError(ss.placed_by, "semantics.compute_at_consumer",
                                    f"{other.name!r} reads {st.stage.name!r} but is not "
                                    f"computed after it in {rs.name!r}'s program",
                                    f"compute {other.name!r} at {rs.name!r} too, or leave "
                                    f"{st.stage.name!r} at root")


def _check_inputs_ready(sched: Schedule, rs: StageSched, steps: list[Step], bodies,
                        kernel_order: list[str]) -> None:
    """A stage computed in this program reads other stages from memory only once a kernel
    launched earlier has written them (an output computed beside a stage that comes before
    it: softmax's y in e's program would read s before s's kernel ran)."""
    mine = kernel_order.index(rs.name)
    for st in steps:
        for ld in walk(bodies[st.stage.name]):
            if not isinstance(ld, Load):
                continue
            try:
                q = sched.stage(ld.buffer.name)
            except KeyError:
                continue  # an input
            host = q.at[0] if q.placement == "at" else q.name
            if q.placement == "inline" or host == rs.name and q.name != rs.name or \
                    q.name == st.stage.name or q.placement == "at" and \
                    q.name not in sched.op.outputs:  # _check_consumers' business
                continue
            if kernel_order.index(host) > mine or q.name == rs.name and not st.is_root:
                # blame the move that put the reader here, or the one that put q later
                blame = sched.stage(st.stage.name).placed_by if q.placement == "root" \
                    else q.placed_by
                raise MoveError(blame, "semantics.compute_at_order", f"{st.stage.name!r}"
                                f" is computed in the program of {rs.name!r} but "
                                f"reads {q.name!r}, which is computed after it (in the "
                                f"kernel of {host!r})",
                                f"compute {st.stage.name!r} at a stage that comes after "
                                f"{q.name!r}, or leave it at root")


def _fold_online(sched: Schedule, steps: list[Step], bodies) -> list[Step]:
    """An online sum absorbs its max stage: one pass computes both (softmax style)."""
    out = list(steps)
    for st in steps:
        if st.strategy != "online":
            continue
        idx = sched.stage(st.stage.name).reduction_by
        r = st.body
        inner = r.body
        ok = r.op == "sum" and isinstance(inner, Unary) and inner.op == "exp" \
            and isinstance(inner.x, Binary) \
            and inner.x.op == "sub" and isinstance(inner.x.b, Load)
        mx = inner.x.b.buffer.name if ok else None
        mstep = next((s for s in out if s.stage.name == mx), None)
        if mstep is None or not isinstance(mstep.body, Reduce) or mstep.body.op != "max":
            raise MoveError(idx, "semantics.online", f"{st.stage.name!r} is not "
                            "sum_(exp(x - m)) with m a max computed in the same program",
                            "compute the max stage at the same consumer, then use online")
        if mstep.store_out:
            raise MoveError(idx, "semantics.online", f"the max {mx!r} is an output stored "
                            f"from this program; an online {st.stage.name!r} folds it into "
                            "a running max that is never final per chunk",
                            f"use looped for {st.stage.name!r}, or leave {mx!r} at root")
        ren = {a.name: AxisRef(b) for a, b in zip(mstep.body.axes, r.axes)}
        if len(mstep.body.axes) != len(r.axes) or \
                substitute_axes(mstep.body.body, ren) != inner.x.a or mstep.level != st.level:
            raise MoveError(idx, "semantics.online", f"the max in {mx!r} does not range over "
                            f"the same values as {st.stage.name!r}'s exponent",
                            "online needs sum_(exp(x - max_(x))) over the same axis")
        # one pass computes both, so the sum also stages what the max asked to cache
        have = {c[0] for c in st.caches}
        caches = st.caches + tuple(c for c in mstep.caches if c[0] not in have)
        out[out.index(st)] = replace(st, online_max=mx, caches=caches)  # folds shift places
        out.remove(mstep)
    return out
