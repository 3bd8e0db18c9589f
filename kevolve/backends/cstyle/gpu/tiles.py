"""Shared-memory tiles where a schedule caches (CUDA and HIP generic path).

`{"m": "cache", "stage": S, "buffer": B, "scope": "shared"}`: before step S runs, all
threads of the block copy the tile of B that S reads in this program — one element per
combination of the block positions (tile coordinates) B's index depends on, in the
current iteration of the sequential loop S sits in — into a `__shared__` array (LDS on
HIP), then a barrier; S's loads of B read the array instead. The copy is coalesced (the
position of B's last index runs fastest) and masked like the step itself, and it works for
any index expression: a gathered embedding row (`table[indices[l], d]`) is a tile over
`(l, d)`. A later step of the same program that reads B at the same element for the same
block coordinates (softmax's `s` and `y` read the row `mx` cached) reads the tile too.

Two loads read the same tile when they print alike with every axis written as its start,
the program's loop variables and `b<pos>` (the tile coordinates); the tile element a use
reads is that of its own axis values minus their start and outer loops.

Refused with `backend.cache` (and a hint): a load whose tile changes inside the step (an
axis over the chunks of a looped reduction, or a contraction's untiled k), and a cache of
a value the program already computes (a stage computed at the root lives in registers or
shared memory). `scope: "local"` is a no-op here: registers are where this path keeps a
thread's values anyway (the source says so)."""

from __future__ import annotations

from dataclasses import dataclass

from ....ir.nodes import AxisRef, Load, Reduce, walk
from ....plan.model import AxisMap, PLoop, Step
from ....schedule.errors import MoveError
from ...pyexpr import Ctx, emit, linear_offset
from ..scalar import ptr
from ..stmts import Assign, Comment, Decl, If, Line, Range
from .vector import Access, loads_with_conds, refs

_UNTILED = "\0"  # marks an axis value that changes inside the step (not a tile coordinate)


@dataclass
class Tile:
    name: str
    buffer: str
    order: list[int]  # block positions, slowest first (the last index's runs fastest)
    sizes: list[int]
    ctype: str
    widen: bool  # bf16/f16 elements: reads convert to float

    @property
    def elems(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n


class Tiles:
    """The shared tiles of one kernel: staged at the steps that cache, read by every step
    of the program that loads the same elements."""

    def __init__(self, b):
        self.b = b
        self.loaded: dict[tuple, Tile] = {}
        self.reads: dict[Load, tuple[Tile, list[tuple[str, AxisMap]]]] = {}

    # -- per step -------------------------------------------------------------------------
    def enter(self, st: Step, pctx: Ctx, out: list) -> None:
        """Stage the tiles `st` caches (at `out`, in uniform control flow), then map the
        step's loads onto the tiles staged so far."""
        self.reads = {}
        if not self.loaded and not st.caches:
            return
        canon, where = self.canon(st), self.where_of(st)
        for buf, scope, _copy in st.caches:  # no copy engine here: bulk copies too
            if buf == st.stage.out.name:  # a bulk write of the output (Triton's copy engine)
                out.append(Comment(f"cache {buf} (the stage's output): written by the "
                                   "threads here"))
                continue
            if scope != "shared":
                out.append(Comment(f"cache {buf} (local): registers are this path's home "
                                   "for a thread's values already; nothing to stage"))
                continue
            found = [ld for ld in self.loads_of(st, pctx) if ld.buffer.name == buf]
            if not found:
                how = "as a value computed in the same program (registers or shared " \
                    "memory)" if buf in pctx.locals else "only through inlined code"
                raise MoveError(None, "backend.cache", f"{self.b.lang.name}: stage "
                                f"{st.stage.name!r} reads {buf!r} {how}, not from memory",
                                f"drop the cache of {buf!r}, or cache a buffer the stage "
                                "loads from memory (what it reads through inlined stages "
                                "counts)")
            for ld in found:
                key = self.key(st, ld, canon)
                if key not in self.loaded:
                    self.loaded[key] = self.stage(st, ld, pctx, out, where.get(ld, [()]))
        if self.loaded:
            for ld in self.loads_of(st, pctx):
                tile = self.loaded.get(self.key(st, ld, canon, strict=False))
                if tile is not None:
                    self.reads[ld] = (tile, self.coords(st, ld, tile))

    def loads_of(self, st: Step, pctx: Ctx) -> list[Load]:
        """Loads of memory in the step's body (in order, once each)."""
        seen: list[Load] = []
        for n in walk(st.body):
            if isinstance(n, Load) and n.buffer.name not in pctx.locals and n not in seen:
                seen.append(n)
        return seen

    def where_of(self, st: Step) -> dict[Load, list[tuple]]:
        """The where() conditions around each read of each load of the step (a load under
        a condition may only be valid where it holds)."""
        out: dict[Load, list[tuple]] = {}
        exprs = [st.body] + [n.body for n in walk(st.body) if isinstance(n, Reduce)]
        for e in exprs:
            for ld, occ in loads_with_conds(e).items():
                out.setdefault(ld, []).extend(occ)
        return out

    # -- identity -------------------------------------------------------------------------
    def canon(self, st: Step) -> Ctx:
        """Axis values of `st` as expressions over the program's loop variables and the
        tile coordinates `b<pos>`, without declarations."""
        c = Ctx()
        todo = [(m, False) for m in st.spatial] + [(m, True) for m in st.reduce]
        for _ in range(len(todo) + 1):
            rest = []
            for m, red in todo:
                try:
                    c.axes[m.axis.name] = self.axis_canon(st, m, red, c)
                except KeyError:
                    rest.append((m, red))
            todo = rest
        for m, _ in todo:  # bounds that cannot be written without declarations
            c.axes[m.axis.name] = _UNTILED
        return c

    def axis_canon(self, st: Step, m: AxisMap, red: bool, c: Ctx) -> str:
        b = self.b
        if m.fused:
            f, which = m.fused
            inner = b.k.root.axis(b.loops[f].origin[1])
            ie = emit(inner.extent, c, b.lang.expr, ptr)
            return f"({b.var[f]} {'/' if which == 0 else '%'} ({ie}))"
        parts = [emit(m.axis.start, c, b.lang.expr, ptr)]
        for ln, s in zip(m.loops, m.strides):
            lp = next((x for x in st.reduce_loops if x.name == ln), None) if red \
                else b.loops[ln]
            if lp.role == "block":
                parts.append(f"b{lp.pos}" if lp.pos is not None else _UNTILED)
            elif red:
                parts.append(_UNTILED)  # a chunk loop of a looped reduction
            else:
                parts.append(b.var[ln] if s == 1 else f"{b.var[ln]} * {s}")
        return "(" + " + ".join(parts) + ")"

    def positions(self, st: Step, ld: Load) -> list[tuple[int, int, str, AxisMap, PLoop]]:
        """(position, size, axis, map, block loop) of every tile coordinate the load's index
        uses, ordered by the buffer dim that first uses it (the last dim's runs fastest)."""
        b = self.b
        out: list = []
        maps = {m.axis.name: (m, False) for m in st.spatial}
        maps.update({m.axis.name: (m, True) for m in st.reduce})
        for e in ld.index:
            for n in walk(e):
                if not isinstance(n, AxisRef) or n.axis.name not in maps:
                    continue
                m, red = maps[n.axis.name]
                lp = next((x for x in st.reduce_loops if x.name in m.loops
                           and x.role == "block"), None) if red else b.block_of(m)
                if lp is None or lp.pos is None or any(p == lp.pos for p, *_ in out):
                    continue
                out.append((lp.pos, lp.size, n.axis.name, m, lp))
        return out

    def key(self, st: Step, ld: Load, canon: Ctx, strict: bool = True):
        """What identifies the tile `ld` reads: its element at each tile coordinate, and
        the bounds of the axes it spans (the copy is masked by them)."""
        text = emit(ld, canon, self.b.lang.expr, ptr)
        spans = tuple((p, size, canon.axes[a], emit(m.axis.extent, canon, self.b.lang.expr,
                                                     ptr))
                      for p, size, a, m, _ in self.positions(st, ld))
        if _UNTILED in text or any(_UNTILED in x for s in spans for x in s[2:]):
            if not strict:
                return None
            raise MoveError(None, "backend.cache", f"{self.b.lang.name}: the tile of "
                            f"{ld.buffer.name!r} that stage {st.stage.name!r} reads changes "
                            "inside the stage (it depends on a looped reduction's chunk "
                            "loop or on an untiled axis), so one program has no fixed tile "
                            "to stage", "cache it in a stage that reduces over one whole "
                            "tile (drop the split of its reduce axis), or drop the cache")
        return (ld.buffer.name, text, spans, st.level)

    # -- staging and reading --------------------------------------------------------------
    def stage(self, st: Step, ld: Load, pctx: Ctx, out: list, occ: list[tuple]) -> Tile:
        """The cooperative copy: every thread copies elements tid, tid + T, ... of the tile
        (the position of the buffer's last index fastest: coalesced), then a barrier. A load
        read only under where() conditions is copied where they hold (or, when they need
        more than the tile's axes, where its index is inside the buffer)."""
        b = self.b
        spans = self.positions(st, ld)
        dtype = ld.buffer.dtype
        tile = Tile(f"kv_c{len(self.loaded)}", ld.buffer.name, [s[0] for s in spans],
                    [s[1] for s in spans], b.lang.ptr_type(dtype), dtype.name in ("bf16", "f16"))
        b.shared_array(tile.name, tile.ctype, tile.elems, 16)
        coords = " x ".join(f"b{p}[{n}]" for p, n in zip(tile.order, tile.sizes)) or "1"
        vec = self.vector_copy(st, ld, spans, occ, out)
        W = vec.count * vec.lanes if vec else 1
        how = f", copied as {vec.count} x {vec.vtype} per thread" if vec else ""
        out.append(Comment(f"cache {ld.buffer.name} (shared) for stage {st.stage.name}: "
                           f"tile {tile.name} over {coords}, "
                           f"{tile.elems * dtype.itemsize} bytes{how}"))
        c = b.fresh("c")
        body: list = []
        out.append(Range(c, "tid", str(tile.elems // W), str(b.T), body))
        stride, decls = 1, []
        for n, (p, size) in enumerate(zip(reversed(tile.order), reversed(tile.sizes))):
            size //= W if n == 0 else 1  # vectors of W along the innermost position
            e = c if stride == 1 else f"({c} / {stride})"
            if n < len(tile.order) - 1:
                e = f"{e} % {size}"
            decls.append(Decl(f"b{p}", "i64", e if n or W == 1 else f"({e}) * {W}"))
            stride *= size
        body.extend(reversed(decls))
        ctx = Ctx(locals=pctx.locals)
        for m in st.spatial:
            if b.block_of(m) is None:
                b.value(m, ctx, body, None)
        for lp in st.reduce_loops:
            b.role[lp.name] = lp.role
        red = {m.axis.name for m in st.reduce}
        for p, size, _a, m, lp in sorted(spans, key=lambda s: (s[2] in red, s[0])):
            b.bounds(m, ctx, body)
            hi = b.block_bound(m, lp, ctx)
            if hi != str(size):
                inner: list = []
                body.append(If(f"b{p} < {hi}", inner))
                body = inner
            b.value(m, ctx, body, f"b{p}")
        if all(occ):  # read under where() only
            conds = self.where_conds(occ, ctx)
            if conds is None:  # stay inside the buffer
                idx = [b.ex(e, ctx) for e in ld.index]
                conds = [f"({i}) >= 0 && ({i}) < ({b.ex(s, ctx)})"
                         for i, s, e in zip(idx, ld.buffer.shape, ld.index)
                         if any(isinstance(n, AxisRef) for n in walk(e))]
            if conds:
                inner = []
                body.append(If(" && ".join(conds), inner))
                body = inner
        off = linear_offset(ld.index, ld.buffer.shape, lambda e: b.ex(e, ctx))
        if vec:
            body.extend(b.vec.copies(vec, f"{tile.name} + {c} * {W}",
                                     f"p_{ld.buffer.name} + {off}"))
        else:
            body.append(Assign(f"{tile.name}[{c}]", f"p_{ld.buffer.name}[{off}]"))
        out.append(Line(b.lang.barrier))
        return tile

    def vector_copy(self, st: Step, ld: Load, spans, occ: list[tuple], out: list):
        """The vector access the copy uses when the tile's innermost position is a loop the
        schedule vectorized (and the access is legal, see vector.py), else None."""
        if not spans or not (spans[-1][4].vector or 0) > 1:
            return None
        _, size, a, m, lp = spans[-1]
        vec = self.b.vec
        guards = vec.extent_guard(m, lp.vector, size, st.stage.name)
        acc = vec.access(ld, m, lp.vector, [()]) if not isinstance(guards, str) else guards
        if isinstance(acc, Access) and any(refs(c, a) for o in occ for c, _ in o):
            acc = f"a where() condition depends on {a}"
        if isinstance(acc, str):
            out.append(Comment(f"vectorize {lp.name} x{lp.vector}: scalar copy of "
                               f"{ld.buffer.name} into shared memory ({acc})"))
            return None
        vec.require(guards, [acc])
        return acc

    def where_conds(self, occ: list[tuple], ctx: Ctx) -> list[str] | None:
        """The where() conditions every read shares, printed in `ctx`; None when the reads
        differ or a condition needs an axis the copy does not bind."""
        if any(o != occ[0] for o in occ):
            return None
        try:
            return [self.b.ex(c, ctx) if taken else f"!({self.b.ex(c, ctx)})"
                    for c, taken in occ[0]]
        except KeyError:
            return None

    def coords(self, st: Step, ld: Load, tile: Tile) -> list[tuple[str, AxisMap]]:
        """The axis of `st` (and its map) at each of the tile's positions."""
        by_pos = {p: (a, m) for p, _, a, m, _ in self.positions(st, ld)}
        return [by_pos[p] for p in tile.order]

    def read(self, ld: Load, ctx: Ctx) -> str | None:
        """The tile element a load of the current step reads in `ctx`, or None."""
        hit = self.reads.get(ld)
        if hit is None:
            return None
        tile, axes = hit
        b = self.b
        flat, stride = [], 1
        for (a, m), size in reversed(list(zip(axes, tile.sizes))):
            base = [x for x in (ctx.axes[f"__start_{a}"], b.outer_part(m)) if x != "0"]
            co = ctx.axes[a] if not base else f"({ctx.axes[a]} - {' - '.join(base)})"
            flat.append(co if stride == 1 else f"{co} * {stride}")
            stride *= size
        v = f"{tile.name}[{' + '.join(reversed(flat)) or '0'}]"
        return f"kv_f32({v})" if tile.widen else v

