"""The GPU half of the C-like family: CUDA and HIP kernels from one emitter.

A program of the plan (one grid point) is one thread block: the grid loops are decoded
from a flattened `blockIdx.x`. Inside a program every step spreads its points (the block
positions it spans, innermost fastest) over the block's threads:

- a step without reductions, or with at least as many points as threads, gives each thread
  whole points (`flat = tid + it * T`); a thread reduces its own points sequentially;
- a step with fewer points than threads splits each point's reduction over `R = T / S`
  lanes: each lane strides the innermost reduce block, then the lanes combine with
  `__shfl_xor` butterflies inside a wavefront and shared memory across wavefronts. The
  lanes of a point are the fast thread index when the reduction runs along contiguous
  memory (a softmax row), the slow one otherwise (a jagged column sum: threads along d).

Values of steps computed at the root live in shared memory when they are arrays over block
positions (another thread may read them) and in registers when they are scalars (every
thread of the block holds the combined value). `__syncthreads()` follows every step that
writes shared memory and closes every sequential loop.

Contractions (`dot` steps) whose kernel is the contraction plus an optional pointwise
epilogue take a tiled path: operand tiles staged in shared memory, a per-thread register
micro-tile (or WMMA tensor-core fragments for bf16/f16 operands on CUDA), and the epilogue
evaluated at the store. Every other shape of plan takes the generic path above.

A language is data (`CudaLanguage`, `HipLanguage`): index names, shuffle, barrier, the
wavefront, types."""

from __future__ import annotations

from dataclasses import replace

from ....ir.nodes import AxisRef, Reduce, walk
from ....plan.model import KernelPlan, Plan, Step
from ....plan.walk import grid_count, grid_decode, reduces_in, scan_map
from ....schedule.errors import MoveError
from ...pyexpr import Ctx, emit
from ..languages import CudaLanguage
from ..scalar import ScalarEmitter, local_type, ptr
from ..stmts import Assign, Comment, Decl, For, If, Line, Range, Scope
from .dot import DotBuilder
from .tiles import Tiles
from .vector import Vectors

DEFAULT_WARPS = 4
_SIZE = {"float": 4, "int64_t": 8, "int32_t": 4, "double": 8}  # bytes; 2 for bf16/f16 types

# -- the generic builder ------------------------------------------------------------------


def _prod(xs) -> int:
    r = 1
    for x in xs:
        r *= x
    return r


class GpuEmitter(ScalarEmitter):
    """Builds one kernel's body as a statement tree for a GPU language."""

    def __init__(self, plan: Plan, k: KernelPlan, lang: CudaLanguage):
        super().__init__(plan, k, lang)
        self.W = lang.wavefront
        self.T = (k.num_warps or DEFAULT_WARPS) * lang.wavefront
        self.shared: list[tuple[str, str, int]] = []  # (name, C type, elements)
        self.red_arrays = 0  # kv_red arrays (T floats each) the block reductions need
        self.red_arrays_i64 = 0  # kv_redl arrays (T int64 each) for integer reductions
        self.uses_wmma = False
        self.path = "generic"
        self.vec = Vectors(self)  # vectorize: per-thread vector loads and stores
        self.tiles = Tiles(self)  # cache: shared-memory tiles

    # -- shared memory ---------------------------------------------------------------
    def shared_array(self, name: str, ctype: str, n: int, align: int = 4) -> None:
        self.shared.append((name, ctype, n, align))

    @property
    def shared_bytes(self) -> int:
        """Static shared memory as laid out in declaration order (what ptxas reports)."""
        off = 4 * self.T * self.red_arrays + 8 * self.T * self.red_arrays_i64
        for _, t, n, align in self.shared:
            off = -(-off // align) * align + n * _SIZE.get(t, 2)
        return off

    def shared_decls(self) -> list[str]:
        sh = self.lang.shared_prefix
        out = [f"    {sh} float kv_red{i}[{self.T}];" for i in range(self.red_arrays)]
        out += [f"    {sh} long long kv_redl{i}[{self.T}];"
                for i in range(self.red_arrays_i64)]
        for name, t, n, align in self.shared:
            spec = f"__align__({align}) " if align > 4 else ""
            out.append(f"    {sh} {spec}{t} {name}[{n}];")
        return out

    def ex(self, e, ctx: Ctx) -> str:
        """Print `e`; loads of the current step that a shared tile holds read the tile."""
        if not self.tiles.reads:
            return super().ex(e, ctx)
        load = self.lang.expr.load
        lang = replace(self.lang.expr, load=lambda p, off, mask, ld:
                       self.tiles.read(ld, ctx) or load(p, off, mask, ld))
        return emit(e, ctx, lang, ptr)

    # -- program -----------------------------------------------------------------------
    def build(self) -> list:
        dot = DotBuilder.try_build(self)
        if dot is not None:
            self.path = "dot-wmma" if self.uses_wmma else "dot-simt"
            hints = [f"vectorize {lp.name}" for lp in self.k.loops if (lp.vector or 0) > 1] \
                + [f"cache {b} ({sc})" for st in self.k.steps for b, sc, _ in st.caches]
            if hints:  # its operand tiles are in shared memory already
                dot.insert(0, Comment(f"{', '.join(hints)}: not used by the tiled dot path"))
            return dot
        return self.walk()

    def open_grid(self, out: list) -> list:
        """A program is one thread block: the thread index, then the grid indices."""
        out.append(Decl("tid", "i64", f"(int64_t){self.lang.thread_idx}"))
        self.grid_ids(out)
        return out

    def close_seq(self, lvl, body: list) -> None:
        body.append(Line(self.lang.barrier))  # the next trip overwrites shared values others read

    def grid_ids(self, out: list) -> None:
        """Decode the flattened block index into one index per grid loop (last fastest);
        two grid loops with group_m get grouped ordering (L2 reuse in GEMMs)."""
        k = self.k
        if not k.grid:
            return
        out.append(Decl("pid", "i64", f"(int64_t){self.lang.block_idx}"))
        counts = [self.ex(grid_count(k, lp), Ctx()) for lp in k.grid]
        out += [Decl(v, "i64", e) for v, e in grid_decode(k, counts)]
        for lp in k.grid:
            self.var[lp.name] = f"g_{lp.name}"

    # -- one step ------------------------------------------------------------------------
    def step(self, st: Step, pctx: Ctx, out: list) -> None:
        if st.strategy == "scan":
            return self.scan_step(st, pctx, out)
        reds = reduces_in(st.body)
        ps = self.positions(st)
        S = _prod(sz for _, sz in ps)
        self.tiles.enter(st, pctx, out)  # stage the tiles it caches; map its loads on tiles
        vs = self.vec.plan(st, pctx, out) if ps else None
        n = S // vs.width if vs else S  # points, or vectors of W points
        R = max(1, self.T // n) if reds else 1
        if vs:
            out.append(Comment(f"stage {st.stage.name} ({st.strategy}): {S} point(s) as "
                               f"{n} vector(s) of {vs.width}, {R} lane(s) per vector"))
            self.vec.note(st, vs, out)
        else:
            out.append(Comment(f"stage {st.stage.name} ({st.strategy}): {S} point(s), "
                               f"{R} lane(s) per point"))
        if not ps:
            self.scalar_step(st, pctx, out, reds)
        elif R == 1:
            self.owned_step(st, pctx, out, reds, n, vs)
        else:
            self.lanes_step(st, pctx, out, reds, n, R, vs)

    # -- scans: each thread walks the scan axis for its points of the other positions ---
    def scan_iters(self, st: Step) -> tuple[int, int, list[tuple[int, int]]]:
        """(points of the other positions, trips of the thread loop, those positions)."""
        _, others = self.scan_positions(st)
        S = _prod(sz for _, sz in others)
        return S, -(-S // self.T), others

    def carry(self, st: Step, ctx: Ctx, out: list) -> None:
        """A thread's running values: one per point it owns (`iters` of them)."""
        r = reduces_in(st.body)[0]
        _, iters, _ = self.scan_iters(st)
        c = self.fresh("carry")
        atype, ident, _, _ = self.lang.acc(r)
        out.append(Decl(c, atype, None, iters))
        v = self.fresh("c")
        out.append(For(v, str(iters), [Assign(f"{c}[{v}]", ident)]))
        self.carries[st.stage.name] = c

    def scan_step(self, st: Step, pctx: Ctx, out: list) -> None:
        """A prefix reduction: the points of the step's other block positions are spread
        over the threads (flat = tid + it * T), and each thread walks the scan axis' block
        in order (reversed for a reverse scan) carrying one running value per point."""
        r = reduces_in(st.body)[0]
        S, iters, others = self.scan_iters(st)
        out.append(Comment(f"stage {st.stage.name} (scan along {st.scan.axis}): {S} point(s), "
                           "one thread each"))
        if st.stage.name not in self.carries:
            self.carry(st, pctx, out)
        c = self.carries[st.stage.name]
        jpos, _ = self.scan_positions(st)
        jsize = self.block_of(scan_map(st)).size
        body: list = []
        it = self.fresh("it")
        out.append(For(it, str(iters), body))
        flat = self.fresh("p")
        body.append(Decl(flat, "i64", f"tid + {it} * {self.T}" if iters > 1 else "tid"))
        if S < self.T:
            inner: list = []
            body.append(If(f"{flat} < {S}", inner))
            body = inner
        stride, decls = 1, []
        for n, (pos, size) in enumerate(reversed(others)):
            e = flat if stride == 1 else f"({flat} / {stride})"
            decls.append(Decl(f"b{pos}", "i64", f"{e} % {size}" if n < len(others) - 1 else e))
            stride *= size
        body.extend(reversed(decls))
        walk: list = []
        if st.scan.reverse:
            body.append(For(f"b{jpos}_r", str(jsize), walk))
            walk.append(Decl(f"b{jpos}", "i64", f"{jsize - 1} - b{jpos}_r"))
        else:
            body.append(For(f"b{jpos}", str(jsize), walk))
        ctx = Ctx(locals=pctx.locals)
        walk = self.bind_point(st, ctx, walk)
        ctx.reduces[r] = self.scan_point(st, r, ctx, walk, f"{c}[{it}]")
        self.finish(st, pctx, ctx, walk, out)

    def scalar_step(self, st: Step, pctx: Ctx, out: list, reds) -> None:
        """No block positions: every thread takes part in the reductions (R = T lanes) and
        ends up holding the value in a register; a root step stores it from thread 0."""
        ctx = Ctx(locals=pctx.locals)
        for m in st.spatial:
            self.value(m, ctx, out, None)
        for r in reds:
            ctx.reduces[r] = self.lane_reduce(st, r, ctx, out, None, "tid", self.T, 1, 1)
        for r in reds:
            self.fix_empty(st, r, ctx, out, ctx.reduces[r])
        val = self.ex(st.body, ctx)
        if st.is_root:
            body: list = []
            out.append(If("tid == 0", body))
            self.store(st, val, ctx, body)
            return
        name = f"val_{st.stage.name}"
        out.append(Decl(name, local_type(st), val))
        pctx.locals[st.stage.name] = name
        if st.store_out:  # an output computed here: thread 0 stores it too
            body = []
            out.append(If("tid == 0", body))
            self.store(st, name, ctx, body)

    def owned_step(self, st: Step, pctx: Ctx, out: list, reds, S: int, vs=None) -> None:
        """Each thread owns whole points (flat = tid + it * T) and reduces them itself
        (`vs`: S vector points of W elements each)."""
        T = self.T
        iters = -(-S // T)
        body: list = []
        it = self.fresh("it")
        out.append(For(it, str(iters), body, unroll=iters if iters <= 8 else None))
        flat = self.fresh("p")
        body.append(Decl(flat, "i64", f"tid + {it} * {T}" if iters > 1 else "tid"))
        if S < T:
            inner: list = []
            body.append(If(f"{flat} < {S}", inner))
            body = inner
        ctx = Ctx(locals=pctx.locals)
        body = self.point(st, ctx, body, flat, vs)
        for r in reds:
            if st.strategy == "online" and r is st.body:
                ctx.reduces[r] = self.online_point(st, r, ctx, body, None)
                continue
            a = self.fresh("a")
            atype, ident, _, _ = self.lang.acc(r)
            body.append(self.acc_decl(a, ident, vs, atype))
            rctx = ctx.child()
            inner = self.red_loops(st, r, rctx, body, None, vs)
            self.accumulate(r, rctx, inner, a, vs)
            for t in self.lanes_of(a, vs):
                self.empty_fix(r, rctx, body, t)
            ctx.reduces[r] = a
        self.finish(st, pctx, ctx, body, out, vs)

    def acc_decl(self, a: str, ident: str, vs, atype: str = "f32") -> object:
        return Decl(a, atype, ident) if vs is None else \
            self.vec.acc_decl(a, ident, vs.width, self.lang.types[atype])

    def lanes_of(self, a: str, vs) -> list[str]:
        """An accumulator's registers: itself, or one per lane of a vector point."""
        return [a] if vs is None else [f"{a}[{w}]" for w in range(vs.width)]

    def accumulate(self, r: Reduce, ctx: Ctx, inner: list, a: str, vs) -> None:
        """Fold the reduction body at the innermost reduce loop into accumulator `a`
        (with `vs`: per lane of the vector point, one accumulator each)."""
        if vs is not None:
            inner, ctx, w = self.vec.lanes(vs, ctx, inner, [r.body])
            a = f"{a}[{w}]"
        v = self.ex(r.body, ctx)
        _, _, combine, to_acc = self.lang.acc(r)
        inner.append(Assign(a, combine.format(a=a, b=to_acc.format(v))))

    def lanes_step(self, st: Step, pctx: Ctx, out: list, reds, S: int, R: int,
                   vs=None) -> None:
        """Fewer points than threads: R lanes per point split each reduction, then combine
        (shuffles within a wavefront, shared memory across wavefronts)."""
        fast = self.reduce_inner(st, reds[0])  # lanes on the fast thread index
        s, r = self.fresh("s"), self.fresh("r")
        if fast:
            out += [Decl(s, "i64", f"tid / {R}"), Decl(r, "i64", f"tid % {R}")]
        else:
            out += [Decl(s, "i64", f"tid % {S}"), Decl(r, "i64", f"tid / {S}")]
        ctx = Ctx(locals=pctx.locals)
        for m in st.spatial:
            if self.block_of(m) is None:
                self.value(m, ctx, out, None)
        accs = {}
        for red in reds:
            accs[red] = self.lane_reduce(st, red, ctx, out, s, r, R, S, 1 if fast else S, vs)
        fin: list = []
        out.append(Scope(fin))
        fctx = Ctx(locals=pctx.locals)
        fctx.axes.update({k2: v for k2, v in ctx.axes.items()})
        fctx.reduces.update(accs)
        guard: list = []
        fin.append(If(f"{r} == 0", guard))
        body = self.point(st, fctx, guard, s, vs)
        for red in reds:
            c = fctx.child()
            for t in self.lanes_of(accs[red], vs):
                self.fix_empty(st, red, c, body, t)
        self.finish(st, pctx, fctx, body, out, vs)

    def fix_empty(self, st: Step, r: Reduce, ctx: Ctx, body: list, target: str) -> None:
        """max/min of an empty segment is 0: bind the reduce extents here, then fix."""
        if r.op in ("sum", "prod"):
            return
        for m in st.reduce:
            if m.axis in r.axes:
                self.bounds(m, ctx, body)
        self.empty_fix(r, ctx, body, target)

    def finish(self, st: Step, pctx: Ctx, ctx: Ctx, body: list, out: list, vs=None) -> None:
        """The step's value at an in-bounds point: the root stores it; a step computed at
        the root writes its shared array (then a barrier before anyone reads it)."""
        if vs is not None:
            return self.vec.finish(st, pctx, ctx, body, out, vs)
        val = self.ex(st.body, ctx)
        if st.is_root:
            self.store(st, val, ctx, body)
            return
        size, idx = self.local_index(st)
        name = f"val_{st.stage.name}"
        self.shared_array(name, self.lang.types[local_type(st)], size)
        body.append(Assign(f"{name}[{idx}]", val))
        if st.store_out:  # an output computed here: stored as well as kept
            self.store(st, f"{name}[{idx}]", ctx, body)
        if st.online_max:  # the folded max is read by later steps too
            mname = f"val_{st.online_max}"
            self.shared_array(mname, "float", size)
            body.append(Assign(f"{mname}[{idx}]", ctx.locals[st.online_max]))
            pctx.locals[st.online_max] = f"{mname}[{idx}]"
        pctx.locals[st.stage.name] = f"{name}[{idx}]"
        out.append(Line(self.lang.barrier))

    # -- points and loops --------------------------------------------------------------
    def point(self, st: Step, ctx: Ctx, out: list, flat: str, vs=None) -> list:
        """Bind the step's spatial axis values at point `flat` (an index over the step's
        block positions, innermost fastest); returns the body that runs when the point is
        inside the masks. With `vs` a point is a vector: `b<pos>` of its position is the
        first of W elements."""
        order = sorted({lp.pos: lp.size for m in st.spatial
                        if (lp := self.block_of(m)) is not None}.items())
        stride = 1
        decls = []
        for n, (pos, size) in enumerate(reversed(order)):
            vec = vs is not None and pos == vs.pos
            if vec:
                size //= vs.width
            e = flat if stride == 1 else f"({flat} / {stride})"
            if n < len(order) - 1:
                e = f"{e} % {size}"
            if vec:
                e = f"({e}) * {vs.width}"
            decls.append(Decl(f"b{pos}", "i64", e))
            stride *= size
        out.extend(reversed(decls))
        return self.bind_point(st, ctx, out)

    def bind_point(self, st: Step, ctx: Ctx, out: list, loose: bool = False) -> list:
        """With `b<pos>` declared, bind the step's spatial axis values and open the masks.
        `loose`: an extent that depends on another block axis (a triangle) is replaced by
        its max_extent (for loading operand tiles, which span one axis only)."""
        body = out
        by_pos: dict[int, list] = {}
        for m in st.spatial:
            lp = self.block_of(m)
            if lp is None:
                if m.axis.name not in ctx.axes:
                    self.value(m, ctx, body, None)
            else:
                by_pos.setdefault(lp.pos, []).append(m)
        for pos in sorted(by_pos):
            ms = by_pos[pos]
            lp = self.block_of(ms[0])
            for m in ms:
                if loose:
                    self.loose_bounds(m, ctx)
                self.bounds(m, ctx, body)
            hi = self.block_bound(ms[0], lp, ctx)
            if hi != str(lp.size):
                inner: list = []
                body.append(If(f"b{pos} < {hi}", inner))
                body = inner
            for m in ms:
                self.value(m, ctx, body, f"b{pos}")
        return body

    def loose_bounds(self, m, ctx: Ctx) -> None:
        a = m.axis
        refs = [n for e in (a.extent, a.start) for n in walk(e) if isinstance(n, AxisRef)]
        if not refs:
            return
        if a.max_extent is None or any(isinstance(n, AxisRef) for n in walk(a.start)):
            raise NotImplementedError(f"axis {a.name!r}: no loose bound")
        ctx.axes[f"__ext_{a.name}"] = f"({self.ex(a.max_extent, ctx)})"
        ctx.axes[f"__start_{a.name}"] = self.ex(a.start, ctx)

    def red_loops(self, st: Step, r: Reduce, ctx: Ctx, out: list,
                  lanes: tuple[str, int] | None, vs=None) -> list:
        """Open the loops over `r`'s reduce axes; the innermost block loop is strided over
        `lanes` = (lane index, lane count) when a point's reduction is split. A vectorized
        innermost block (and no vector points `vs`) reads W elements per step and lane."""
        vr = self.vec.reduce_plan(st, r, ctx, out) if vs is None else None

        def block(lp, v, hi, inner, last):
            if vr is not None and last:
                w, lane, n = vr.width, *(lanes or ("0", 1))
                return Range(v, lane if lane == "0" else f"{lane} * {w}", hi, str(n * w),
                             inner, lp.unroll)
            if lanes is not None and last:
                return Range(v, lanes[0], hi, str(lanes[1]), inner, lp.unroll)
            return For(v, hi, inner, unroll=lp.unroll)
        inner = self.open_reduce_loops(st, r, ctx, out, block)
        return inner if vr is None else self.vec.reduce_lanes(vr, ctx, inner)

    # -- reductions split over lanes -----------------------------------------------------
    def lane_reduce(self, st: Step, r: Reduce, ctx: Ctx, out: list, s: str | None, lane: str,
                    R: int, S: int, lane_stride: int, vs=None) -> str:
        """Accumulate `r` for point `s` over this thread's lane share, then combine the R
        lanes of the point. Returns the register holding the combined value (every lane)."""
        online = st.strategy == "online" and r is st.body
        a = self.fresh("a")
        vals = self.lanes_of(a, vs)
        if online:
            mv = self.fresh("m")
            out.append(Decl(mv, "f32", "(-INFINITY)"))
            vals = [mv, a]
        if online:
            out.append(self.acc_decl(a, self.lang.ident["sum"], vs))
        else:
            atype, ident, _, _ = self.lang.acc(r)
            out.append(self.acc_decl(a, ident, vs, atype))
        scope: list = []
        out.append(Scope(scope))
        sctx = ctx.child()
        body = scope if s is None else self.point(st, sctx, scope, s, vs)
        if online:
            self.online_loop(st, r, sctx, body, mv, a, (lane, R))
        else:
            inner = self.red_loops(st, r, sctx, body, (lane, R), vs)
            self.accumulate(r, sctx, inner, a, vs)
        self.combine_lanes(out, vals, r.op if not online else "online", lane, R, S,
                           lane_stride, s, None if online else r)
        if online:
            ctx.locals[st.online_max] = mv
        return a

    def combine(self, op: str, a: list[str], b: list[str], template: str | None = None
                ) -> list:
        """Statements folding values `b` into `a` (online: (max, sum) pairs); `template`:
        the accumulator's own combine (an integer one's)."""
        if op != "online":
            t = template or self.lang.combine[op]
            return [Assign(x, t.format(a=x, b=y)) for x, y in zip(a, b)]
        (m1, s1), (m2, s2) = a, b
        nm = self.fresh("nm")
        return [Decl(nm, "f32", f"fmaxf({m1}, {m2})"),
                Assign(s1, f"(({m1} == {nm}) ? {s1} : {s1} * expf({m1} - {nm})) + "
                       f"(({m2} == {nm}) ? {s2} : {s2} * expf({m2} - {nm}))"),
                Assign(m1, nm)]

    def combine_lanes(self, out: list, vals: list[str], op: str, lane: str, R: int, S: int,
                      lane_stride: int, s: str | None, r: Reduce | None = None) -> None:
        """Butterfly over the lanes that share a wavefront, then shared memory across
        wavefronts. Runs in uniform control flow: every thread of the block executes it.
        `r` (not an online pair): its accumulator's type, identity and combine."""
        atype, ident, template, _ = self.lang.acc(r) if r is not None else \
            ("f32", None, None, None)
        wide = atype == "i64"
        arr = "kv_redl" if wide else "kv_red"
        W = self.W
        in_warp = 1
        o = lane_stride
        while in_warp < R and o < W:
            tmp = [self.fresh("o") for _ in vals]
            out += [Decl(t, atype, self.lang.shfl.format(v=v, o=o, w=W))
                    for t, v in zip(tmp, vals)]
            out += self.combine(op, vals, tmp, template)
            in_warp *= 2
            o *= 2
        R2 = R // in_warp
        if R2 == 1:
            return
        if wide:
            self.red_arrays_i64 = max(self.red_arrays_i64, len(vals))
        else:
            self.red_arrays = max(self.red_arrays, len(vals))
        sidx = "0" if s is None else s
        slot = f"{sidx} * {R2} + {lane} / {in_warp}"
        w: list = []
        out.append(If(f"{lane} % {in_warp} == 0", w))
        for n, v in enumerate(vals):
            w.append(Assign(f"{arr}{n}[{slot}]", v))
        out.append(Line(self.lang.barrier))
        out += [Assign(v, self.lang.ident["sum"] if op == "online" and n == 1 else
                       "(-INFINITY)" if op == "online" else ident or self.lang.ident[op])
                for n, v in enumerate(vals)]
        i = self.fresh("i")
        body: list = []
        out.append(For(i, str(R2), body, unroll=R2 if R2 <= 32 else None))
        tmp = [self.fresh("q") for _ in vals]
        body += [Decl(t, atype, f"{arr}{n}[{sidx} * {R2} + {i}]")
                 for n, t in enumerate(tmp)]
        body += self.combine(op, vals, tmp, template)
        out.append(Line(self.lang.barrier))

    # -- online (max, sum) --------------------------------------------------------------
    def online_loop(self, st: Step, r: Reduce, ctx: Ctx, body: list, m: str, s: str,
                    lanes) -> None:
        inner = self.red_loops(st, r, ctx, body, lanes)
        x = self.fresh("x")
        inner.append(Decl(x, "f32", self.ex(r.body.x.a, ctx)))
        mn = self.fresh("mn")
        inner.append(Decl(mn, "f32", f"fmaxf({m}, {x})"))
        inner.append(Assign(s, f"{s} * expf({m} - {mn}) + expf({x} - {mn})"))
        inner.append(Assign(m, mn))

    def online_point(self, st: Step, r: Reduce, ctx: Ctx, body: list, lanes) -> str:
        m, s = self.fresh("m"), self.fresh("a")
        body.append(Decl(m, "f32", "(-INFINITY)"))
        body.append(Decl(s, "f32", "0.0f"))
        self.online_loop(st, r, ctx.child(), body, m, s, lanes)
        ctx.locals[st.online_max] = m
        return s


# -- the third legality layer for GPU C languages -----------------------------------------


def check_gpu(backend, sched, plan: Plan, lang: CudaLanguage) -> None:
    """Threads per block, the wavefront and shared memory, each error naming the limit."""
    caps = backend.caps
    for s in sched.stages:
        for lp in s.loops:
            if lp.bind == "threads" and lp.size and lp.size % lang.wavefront:
                raise MoveError(None, "backend.wavefront", f"{backend.name}: {s.name}."
                                f"{lp.name} is bound to threads with {lp.size} lanes, not a "
                                f"multiple of the wavefront of {lang.wavefront}",
                                f"tile {lp.name!r} by a multiple of {lang.wavefront}, or "
                                "leave it unbound (block positions are spread over threads)")
    for k in plan.kernels:
        nw = k.num_warps or DEFAULT_WARPS
        t = nw * lang.wavefront
        if t > caps.max_threads:
            raise MoveError(None, "backend.threads_per_block", f"{backend.name}: {k.name} "
                            f"asks for {nw} warps of {lang.wavefront} = {t} threads per "
                            f"block, over the limit of {caps.max_threads}",
                            f"use at most {caps.max_threads // lang.wavefront} warps "
                            "(launch num_warps)")
        b = GpuEmitter(plan, k, lang)
        b.build()
        if b.shared_bytes > caps.shared_bytes:
            parts = ", ".join(f"{n} {c * _SIZE.get(t, 2)} B" for n, t, c, _ in b.shared)
            if b.red_arrays:
                parts += f", reduction scratch {4 * b.T * b.red_arrays} B"
            raise MoveError(None, "backend.shared_memory", f"{backend.name}: {k.name} needs "
                            f"{b.shared_bytes} bytes of shared memory ({parts}), over the "
                            f"limit of {caps.shared_bytes} bytes per block",
                            "use smaller tiles (split the axes those arrays span, or a "
                            "smaller k tile for contractions)")


__all__ = ["DEFAULT_WARPS", "GpuEmitter", "check_gpu"]
