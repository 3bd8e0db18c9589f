"""THE plan walk: the order in which every C-family execution model (host loops, one
program per GPU block, MTIA staging) emits a kernel, and the plan facts they all read.

`KernelWalk.walk` is a template method: it opens the grid, binds the axis values that only
grid loops form, then emits the steps level by level (top, then each sequential loop,
nested), calling hooks for everything that is syntax. The helpers beside it answer the
questions each emitter used to answer on its own: how many programs a grid loop has, which
steps sit in which loop, which reductions a body holds, the block tile sizes of a step,
how a flat program id decodes into grid indices, and what a module's launcher takes."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.nodes import AxisRef, Buffer, Expr, Load, Op, Reduce, op_dims, walk
from .model import AxisMap, KernelPlan, Plan, PLoop, Step


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


def scan_map(st: Step) -> AxisMap:
    """The axis map of a scan step's scan axis."""
    return next(m for m in st.spatial if m.axis.name == st.scan.axis)


def reversed_loops(k: KernelPlan) -> set[str]:
    """Sequential loops that run from the last trip down: the chunk loops of reverse scans."""
    seq = {lp.name for lp in k.loops if lp.role == "seq"}
    return {ln for st in k.steps if st.scan is not None and st.scan.reverse
            for ln in scan_map(st).loops if ln in seq}


def reads_contiguous(ld: Load, axis: str) -> bool:
    """Whether `axis` appears in the load's last (fastest) index."""
    if not ld.index:
        return False
    return any(isinstance(x, AxisRef) and x.axis.name == axis for x in walk(ld.index[-1]))


def tile_sizes(k: KernelPlan, st: Step) -> dict[int | None, int]:
    """Block size at each layout position a step works on (its kernel's blocks and its own
    reduce blocks; the largest where two share a position). Reduce blocks without a
    position (a contraction's k) are under None."""
    sizes: dict[int | None, int] = {}
    for lp in k.loops + st.reduce_loops:
        if lp.role == "block":
            sizes[lp.pos] = max(sizes.get(lp.pos, 1), lp.size or 1)
    return sizes


def grid_decode(k: KernelPlan, counts: list[str], div: str = "/", minimum: str = "kv_min",
                pid: str = "pid") -> list[tuple[str, str]]:
    """(variable, value) pairs, in order, that decode the flat program id `pid` into one
    index `g_<loop>` per grid loop (the last fastest), given each loop's program count as
    text. Two grid loops with group_m take grouped ordering (L2 reuse in GEMMs): `group_m`
    consecutive rows of programs walk a column together."""
    g = k.grid
    if k.group_m and len(g) == 2:
        a, b = g
        return [("n_a", counts[0]), ("n_b", counts[1]),
                ("per_group", f"{k.group_m} * n_b"),
                ("first", f"({pid} {div} per_group) * {k.group_m}"),
                ("gsize", f"{minimum}(n_a - first, {k.group_m})"),
                (f"g_{a.name}", f"first + ({pid} % per_group) % gsize"),
                (f"g_{b.name}", f"({pid} % per_group) {div} gsize")]
    out, rest = [], pid
    for lp, c in reversed(list(zip(g, counts))):
        if lp is g[0]:
            out.append((f"g_{lp.name}", rest))
        else:
            out.append((f"g_{lp.name}", f"{rest} % ({c})"))
            out.append((f"rest_{lp.name}", f"{rest} {div} ({c})"))
            rest = f"rest_{lp.name}"
    return out


@dataclass(frozen=True)
class ModuleSignature:
    """What a module's launcher takes and checks, as IR: the caller's buffers (inputs, then
    outputs), the scratch buffers the launcher allocates (intermediate stages in global
    memory), the dims in parameter order, and every kernel's shape guards."""

    op: Op
    names: tuple[str, ...]
    scratch: tuple[str, ...]
    dims: tuple[str, ...]
    guards: tuple[tuple[Expr, str], ...]

    @property
    def every(self) -> tuple[str, ...]:
        """Every buffer a kernel takes, in parameter order."""
        return self.names + self.scratch

    def buffer(self, name: str) -> Buffer:
        """The buffer `name` (a scratch name gives its stage's output)."""
        return self.op.buffer(name)

    def scratch_buffers(self) -> list[Buffer]:
        return [self.op.stage(n).out for n in self.scratch]


def module_signature(plan: Plan) -> ModuleSignature:
    op = plan.op
    return ModuleSignature(op, tuple([b.name for b in op.inputs] + list(op.outputs)),
                           tuple(plan.scratch), tuple(op_dims(op)),
                           tuple(g for k in plan.kernels for g in k.guards))


class KernelWalk:
    """One kernel of a plan, walked in the order every C-family execution model emits it.
    Subclasses supply the syntax through the hooks; `walk` returns the statement list."""

    def __init__(self, plan: Plan, k: KernelPlan):
        self.plan, self.k = plan, k
        self.loops = {lp.name: lp for lp in k.loops}
        self.role = {lp.name: lp.role for lp in k.loops}  # reduce loops join as they open
        self.reversed = reversed_loops(k)

    def walk(self) -> list:
        """The kernel body: the grid, the grid-only axis values, then the steps by level
        (each sequential loop opens inside the previous one)."""
        k = self.k
        out: list = []
        body = self.open_grid(out)
        ctx = self.context()
        root_maps = {m.axis.name: m for m in k.steps[-1].spatial}
        for m in root_maps.values():  # grid-only axes: their values may bound the loops below
            if all(self.role.get(ln) == "grid" for ln in m.loops):
                self.axis_value(m, ctx, body)
        for lvl, steps in levels(k):
            if lvl is not None:
                for st in steps:  # a scan's running value outlives its chunk loop's trips
                    if st.scan is not None and lvl.name in scan_map(st).loops:
                        self.carry(st, ctx, body)
                m = next(mm for mm in root_maps.values() if lvl.name in mm.loops)
                body = self.open_seq(lvl, m, m.strides[m.loops.index(lvl.name)], ctx, body)
            for st in steps:
                self.step(st, ctx, body)
            if lvl is not None:
                self.close_seq(lvl, body)
        return out

    # -- hooks ---------------------------------------------------------------------------
    def open_grid(self, out: list) -> list:
        """Open the program's grid in `out`; returns the body one program runs in."""
        raise NotImplementedError

    def context(self):
        """A fresh expression context for the program's top level."""
        raise NotImplementedError

    def axis_value(self, m: AxisMap, ctx, out: list) -> None:
        """Bind the value of an axis that only grid loops form."""
        raise NotImplementedError

    def open_seq(self, lvl: PLoop, m: AxisMap, stride: int, ctx, out: list) -> list:
        """Open sequential loop `lvl` over axis map `m` (`stride` elements per trip);
        returns its body."""
        raise NotImplementedError

    def carry(self, st: Step, ctx, out: list) -> None:
        """Declare the running value of scan step `st` before its chunk loop opens."""

    def close_seq(self, lvl: PLoop, body: list) -> None:
        """After the steps of one trip of `lvl` (GPU: a barrier)."""

    def step(self, st: Step, ctx, out: list) -> None:
        raise NotImplementedError


__all__ = ["KernelWalk", "ModuleSignature", "grid_count", "grid_decode", "levels",
           "module_signature", "reads_contiguous", "reduces_in", "reversed_loops", "scan_map",
           "tile_sizes"]
