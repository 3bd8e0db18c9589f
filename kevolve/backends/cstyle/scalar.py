"""The scalar execution model of the C family: a KernelPlan becomes a tree of loops.

Blocks of the plan become loops whose bounds carry the masks (so no load needs a guard);
grid loops become parallel loops (CPU) or the program grid (GPU, MTIA); steps computed at
the root keep their values in small local arrays indexed by block position. The host C,
numba and MTIA backends print this tree; the GPU emitter (gpu/block.py) builds on it."""

from __future__ import annotations

from ...ir.nodes import AxisRef, Const, Dim, Expr, Load, Reduce, walk
from ...plan.model import AxisMap, KernelPlan, Plan, PLoop, Step
from ...plan.walk import KernelWalk, grid_count, reduces_in, scan_map
from ..pyexpr import Ctx, emit, linear_offset
from .language import CStyleLanguage
from .stmts import AddTo, Assign, Comment, Decl, For, If, Prefetch


def local_type(st: Step) -> str:
    """The type a step's values are kept in between stages: f32 for every float stage
    (bf16 and f16 are computed in f32), the stage's own type for an integer one (an int64
    index above 2^24 does not survive a float)."""
    dt = st.stage.out.dtype
    return "f32" if dt.is_float else dt.name


def ptr(name: str) -> str:
    """A buffer's pointer parameter in every C-family kernel."""
    return f"p_{name}"


class ScalarEmitter(KernelWalk):
    """Builds the loop tree of one kernel of a plan for a scalar language."""

    def __init__(self, plan: Plan, k: KernelPlan, lang: CStyleLanguage):
        super().__init__(plan, k)
        self.lang = lang
        self.var: dict[str, str] = {}
        self.n = 0
        self.carries: dict[str, str] = {}  # scan stage -> its running value (declared)

    def fresh(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def ex(self, e: Expr, ctx: Ctx) -> str:
        return emit(e, ctx, self.lang.expr, ptr)

    def build(self) -> list:
        """The kernel body: grid loops around the program (steps by level)."""
        return self.walk()

    # -- the walk's hooks ----------------------------------------------------------------
    def open_grid(self, out: list) -> list:
        """Grid loops (parallel on the host), nested; the program runs in the innermost."""
        body = out
        for lp in self.k.grid:
            v = f"g_{lp.name}"
            self.var[lp.name] = v
            inner: list = []
            # without atomics, programs that add into shared elements run in order
            kind = "seq" if self.k.root.accumulate and self.lang.serial_accumulate \
                else "grid"
            body.append(For(v, f"({self.ex(grid_count(self.k, lp), Ctx())})", inner, kind))
            body = inner
        return body

    def context(self) -> Ctx:
        return Ctx()

    def axis_value(self, m: AxisMap, ctx: Ctx, out: list) -> None:
        self.value(m, ctx, out, None)

    def open_seq(self, lvl: PLoop, m: AxisMap, stride: int, ctx: Ctx, body: list) -> list:
        self.bounds(m, ctx, body)
        v = f"s_{lvl.name}"
        inner: list = []
        trips = f"(({ctx.axes['__ext_' + m.axis.name]}) + {stride - 1}) / {stride}"
        if lvl.name in self.reversed:  # a reverse scan's chunks, from the last one down
            body.append(For(f"{v}_r", trips, inner, unroll=lvl.unroll))
            ext = ctx.axes['__ext_' + m.axis.name]
            n = f"(({ext}) + {stride - 1}) {self.lang.intdiv} {stride}"
            inner.append(Decl(v, "i64", f"({n}) - 1 - {v}_r"))
        else:
            body.append(For(v, trips, inner, unroll=lvl.unroll))
        self.var[lvl.name] = v
        return inner

    # -- axes ------------------------------------------------------------------------
    def bounds(self, m: AxisMap, ctx: Ctx, out: list) -> None:
        a = m.axis
        if f"__ext_{a.name}" in ctx.axes:
            return
        for key, e in (("ext", a.extent), ("start", a.start)):
            code = self.ex(e, ctx)
            if not isinstance(e, (Const, Dim)):
                v = self.fresh(f"{key}_{a.name}_")
                out.append(Decl(v, "i64", code))
                code = v
            ctx.axes[f"__{key}_{a.name}"] = code

    def outer_part(self, m: AxisMap) -> str:
        """The part of an axis' local index contributed by non-block loops."""
        parts = []
        for ln, s in zip(m.loops, m.strides):
            if self.role.get(ln) != "block":
                parts.append(self.var[ln] if s == 1 else f"{self.var[ln]} * {s}")
        return " + ".join(parts) if parts else "0"

    def value(self, m: AxisMap, ctx: Ctx, out: list, block_var: str | None) -> None:
        a = m.axis
        self.bounds(m, ctx, out)
        st = ctx.axes[f"__start_{a.name}"]
        if m.fused:
            f, which = m.fused
            # f = outer * extent(inner) + inner
            inner = self.k.root.axis(self.loops[f].origin[1])
            ie = self.ex(inner.extent, ctx)
            local = f"({self.var[f]} / ({ie}))" if which == 0 else f"({self.var[f]} % ({ie}))"
        else:
            local = self.outer_part(m)
            if block_var is not None:
                local = block_var if local == "0" else f"{local} + {block_var}"
        v = self.fresh(f"{a.name}_")
        out.append(Decl(v, "i64", local if st == "0" else f"{st} + {local}"))
        ctx.axes[a.name] = v

    def block_bound(self, m: AxisMap, lp: PLoop, ctx: Ctx) -> str:
        ext = ctx.axes[f"__ext_{m.axis.name}"]
        if not m.masked:
            return str(lp.size)
        outer = self.outer_part(m)
        rem = ext if outer == "0" else f"({ext}) - ({outer})"
        return self.lang.min_call.format(a=lp.size, b=rem)

    # -- spatial loops of a step -------------------------------------------------------
    def block_of(self, m: AxisMap) -> PLoop | None:
        for ln in m.loops:
            lp = self.loops.get(ln)
            if lp is not None and lp.role == "block":
                return lp
        return None

    def positions(self, st: Step) -> list[tuple[int, int]]:
        ps = sorted({(lp.pos, lp.size) for m in st.spatial if (lp := self.block_of(m))})
        return ps

    def local_index(self, st: Step) -> tuple[int | None, str]:
        """(array size or None for a scalar, index expression over b<pos> vars)."""
        ps = self.positions(st)
        if not ps:
            return None, ""
        size, idx, stride = 1, [], 1
        for pos, sz in reversed(ps):
            idx.append(f"b{pos}" if stride == 1 else f"b{pos} * {stride}")
            stride *= sz
            size *= sz
        return size, " + ".join(reversed(idx))

    def spatial_nest(self, st: Step, ctx: Ctx, out: list, simd_inner: bool = True):
        """Open loops over the step's block positions (bounds = masks); bind all spatial
        axis values. Returns (innermost body list, ctx)."""
        body = out
        maps_by_pos: dict[int, list[AxisMap]] = {}
        for m in st.spatial:
            lp = self.block_of(m)
            if lp is None:
                self.value(m, ctx, body, None)
            else:
                maps_by_pos.setdefault(lp.pos, []).append(m)
        order = sorted(maps_by_pos)
        for n, pos in enumerate(order):
            ms = maps_by_pos[pos]
            lp = self.block_of(ms[0])
            for m in ms:
                self.bounds(m, ctx, body)
            inner: list = []
            kind = "simd" if simd_inner and n == len(order) - 1 else "seq"
            body.append(For(f"b{pos}", self.block_bound(ms[0], lp, ctx), inner, kind,
                            vector=lp.vector, unroll=lp.unroll))
            body = inner
            for m in ms:
                self.value(m, ctx, body, f"b{pos}")
        return body

    # -- steps -------------------------------------------------------------------------
    def step(self, st: Step, pctx: Ctx, out: list) -> None:
        out.append(Comment(f"stage {st.stage.name} ({st.strategy})"))
        ctx = Ctx(locals=pctx.locals)
        size, idx = self.local_index(st)
        for r in reduces_in(st.body):
            ctx.reduces[r] = self.reduce(st, r, ctx, out, size, idx)
        name = f"val_{st.stage.name}"
        if not st.is_root:
            out.append(Decl(name, local_type(st), None, size))
        vctx = ctx.child()
        # an accumulating store's points may hit one element twice: no simd lanes for it
        body = self.spatial_nest(st, vctx, out, simd_inner=not st.stage.accumulate)
        val = self.ex(st.body, vctx)
        if st.is_root:
            self.store(st, val, vctx, body)
            return
        body.append(Assign(f"{name}[{idx}]" if size else name, val))
        pctx.locals[st.stage.name] = f"{name}[{idx}]" if size else name
        if st.store_out:  # an output computed here: stored as well as kept
            self.store(st, f"{name}[{idx}]" if size else name, vctx, body)

    def reduce_inner(self, st: Step, r: Reduce) -> bool:
        """Accumulate per point with the reduce loop innermost (dot-product order) unless a
        load's fastest index is a spatial block axis (then spatial loops go inside)."""
        if not self.positions(st) or st.strategy == "online":
            return True
        spatial_block = {m.axis.name for m in st.spatial if self.block_of(m)}
        for a in r.axes:  # bounds that vary per spatial point: the reduce loop goes inside
            for e in (a.start, a.extent):
                if {x.axis.name for x in walk(e) if isinstance(x, AxisRef)} & spatial_block:
                    return True
        for n in walk(r.body):
            if isinstance(n, Load) and n.index:
                last = {x.axis.name for x in walk(n.index[-1]) if isinstance(x, AxisRef)}
                if last & spatial_block:
                    return False
        return True

    def reduce_loops(self, st: Step, r: Reduce, ctx: Ctx, out: list, simd: bool,
                     red: tuple[str, str] | None):
        def block(lp, v, hi, inner, last):
            return For(v, hi, inner, "simd" if simd else "seq", red if simd else None,
                       lp.vector, lp.unroll)
        return self.open_reduce_loops(st, r, ctx, out, block)

    def open_reduce_loops(self, st: Step, r: Reduce, ctx: Ctx, out: list, block) -> list:
        """Open the loops over `r`'s reduce axes (sequential chunk loops, then blocks, whose
        statement `block(loop, var, bound, body, is_last_block)` builds) and bind the axis
        values; returns the innermost body."""
        blocks = [ln for m in st.reduce if m.axis in r.axes for ln in m.loops
                  if next(x for x in st.reduce_loops if x.name == ln).role == "block"]
        body = out
        for m in st.reduce:
            if m.axis not in r.axes:
                continue
            self.bounds(m, ctx, body)
            for ln in m.loops:
                lp = next(x for x in st.reduce_loops if x.name == ln)
                self.role[ln] = lp.role
                inner: list = []
                if lp.role == "seq":
                    s = m.strides[m.loops.index(ln)]
                    v = self.fresh(f"s_{ln}_")
                    body.append(For(v, f"(({ctx.axes['__ext_' + m.axis.name]}) + {s - 1}) / "
                                    f"{s}", inner, unroll=lp.unroll))
                    self.var[ln] = v
                    body = inner
                    continue
                v = self.fresh(f"r_{ln}_")
                self.var[ln] = v
                body.append(block(lp, v, self.block_bound(m, lp, ctx), inner,
                                  bool(blocks) and ln == blocks[-1]))
                body = inner
                self.value(m, ctx, body, v)
        return body

    def reduce(self, st: Step, r: Reduce, ctx: Ctx, out: list, size, idx) -> str:
        lang = self.lang
        acc = self.fresh("acc")
        atype, ident, combine, to_acc = lang.acc(r)
        out.append(Decl(acc, atype, None if size else ident, size))
        if st.strategy == "online" and r is st.body:
            return self.online(st, r, ctx, out, size, idx, acc)
        if st.strategy == "scan":
            return self.scan(st, r, ctx, out, size, idx, acc)
        if self.reduce_inner(st, r):
            rctx = ctx.child()
            body = self.spatial_nest(st, rctx, out, simd_inner=False)
            a = self.fresh("a")
            body.append(Decl(a, atype, ident))
            inner = self.reduce_loops(st, r, rctx, body, True, (r.op, a))
            v = self.ex(r.body, rctx)
            inner.append(Assign(a, combine.format(a=a, b=to_acc.format(v))))
            self.empty_fix(r, rctx, body, a)
            body.append(Assign(f"{acc}[{idx}]" if size else acc, a))
        else:
            init = self.spatial_nest(st, ctx.child(), out)
            init.append(Assign(f"{acc}[{idx}]", ident))
            rctx = ctx.child()
            for m in st.spatial:
                if self.block_of(m) is None:
                    self.value(m, rctx, out, None)
            body = self.reduce_loops(st, r, rctx, out, False, None)
            self.prefetches(st, r, rctx, body)
            inner = self.spatial_nest(st, rctx, body)
            tgt = f"{acc}[{idx}]"
            v = self.ex(r.body, rctx)
            inner.append(Assign(tgt, combine.format(a=tgt, b=to_acc.format(v))))
            if r.op not in ("sum", "prod"):
                # a nest of its own after the reduce loops: the spatial extents bound
                # inside those loops are out of scope here, so it binds them again
                fctx = rctx.child()
                for m in st.spatial:
                    for key in ("ext", "start"):
                        fctx.axes.pop(f"__{key}_{m.axis.name}", None)
                fix = self.spatial_nest(st, fctx, out)
                self.empty_fix(r, fctx, fix, tgt)
        return f"{acc}[{idx}]" if size else acc

    def prefetches(self, st: Step, r: Reduce, ctx: Ctx, out: list) -> None:
        """Fetch the rows gathered `distance` iterations ahead (embedding tables): one hint
        per cache line of the row's tile, guarded so the index load stays in bounds."""
        if not st.prefetch or self.lang.prefetch is None:
            return
        blk = [m for m in st.reduce if m.axis in r.axes]
        if len(blk) != 1:
            return
        m = blk[0]
        lp = next(x for x in st.reduce_loops if x.name == m.loops[-1])
        if lp.role != "block":
            return
        dist_of = dict(st.prefetch)
        a = m.axis
        for ld in [n for n in walk(r.body) if isinstance(n, Load) and n.buffer.name in dist_of
                   and any(isinstance(x, Load) for e in n.index for x in walk(e))
                   # rows the reduction walks through: a gather fixed per output point
                   # (x[i, target[i]] inside a sum over c) has nothing ahead to fetch
                   and any(isinstance(x, AxisRef) and x.axis.name == a.name
                           for e in n.index for x in walk(e))]:
            dist = dist_of[ld.buffer.name]
            tiles = [sm for sm in st.spatial if self.block_of(sm) is not None]
            width = max((self.block_of(sm).size for sm in tiles), default=1)
            step = max(1, self.lang.line_bytes // ld.buffer.dtype.itemsize)
            hints = []
            for k in range(0, width, step):  # one hint per cache line of the row's tile
                c = ctx.child()
                c.axes[a.name] = f"({ctx.axes[a.name]} + {dist})"
                for sm in tiles:
                    base = self.outer_part(sm)
                    c.axes[sm.axis.name] = str(k) if base == "0" else f"({base} + {k})"
                hints.append(Prefetch(self.ex(ld, c)))
            # Fetch across segment boundaries (the next bag's rows too): guard only that the
            # index loads stay inside their buffers.
            c = ctx.child()
            c.axes[a.name] = f"({ctx.axes[a.name]} + {dist})"
            conds = [f"({self.ex(ix.index[0], c)}) < ({self.ex(ix.buffer.shape[0], c)})"
                     for e in ld.index for ix in walk(e)
                     if isinstance(ix, Load) and ix.buffer.ndim == 1]
            out.append(If(" && ".join(conds) or "1", hints))

    def empty_fix(self, r: Reduce, ctx: Ctx, out: list, target: str) -> None:
        """max/min of an empty segment is 0 (FBGEMM), not the identity."""
        if r.op in ("sum", "prod") or all(isinstance(a.extent, (Const, Dim)) for a in r.axes):
            return
        # The outermost axis' extent is bound in this scope; an inner one's was bound inside
        # the outer loop, so it is computed again here (an extent that varies with an outer
        # reduce axis cannot make the whole reduction empty on its own: left out).
        inner = {a.name for a in r.axes}
        parts = [ctx.axes[f"__ext_{r.axes[0].name}"]]
        for a in r.axes[1:]:
            if not any(isinstance(n, AxisRef) and n.axis.name in inner for n in walk(a.extent)):
                parts.append(self.ex(a.extent, ctx))
        ext = " * ".join(f"({e})" for e in parts)
        out.append(Assign(target, self.lang.expr.where(f"{ext} > 0", target, self.lang.zero)))

    # -- scans -----------------------------------------------------------------------
    def scan_positions(self, st: Step) -> tuple[int, list[tuple[int, int]]]:
        """The block position of the scan axis, and the step's other positions."""
        jpos = self.block_of(scan_map(st)).pos
        return jpos, [(p, s) for p, s in self.positions(st) if p != jpos]

    def carry(self, st: Step, ctx: Ctx, out: list) -> None:
        """The running value of a scan: one per point of the step's other positions."""
        r = reduces_in(st.body)[0]
        _, others = self.scan_positions(st)
        n = 1
        for _, s in others:
            n *= s
        c = self.fresh("carry")
        atype, ident, _, _ = self.lang.acc(r)
        if others:
            out.append(Decl(c, atype, None, n))
            v = self.fresh("c")
            out.append(For(v, str(n), [Assign(f"{c}[{v}]", ident)]))
        else:
            out.append(Decl(c, atype, ident))
        self.carries[st.stage.name] = c

    def scan(self, st: Step, r: Reduce, ctx: Ctx, out: list, size, idx, acc) -> str:
        """A prefix reduction as a running value: the scan axis' loop runs in order (in
        reverse for a reverse scan), each point combines the body at k = j into the carry
        and takes it. O(extent) per row, against O(extent^2) for re-reading each prefix."""
        if st.stage.name not in self.carries:
            self.carry(st, ctx, out)
        c = self.carries[st.stage.name]
        jpos, others = self.scan_positions(st)
        cidx, stride = [], 1
        for p, s in reversed(others):
            cidx.append(f"b{p}" if stride == 1 else f"b{p} * {stride}")
            stride *= s
        tgt = f"{c}[{' + '.join(reversed(cidx))}]" if others else c
        rctx = ctx.child()
        body = self.scan_nest(st, rctx, out, jpos)
        value = self.scan_point(st, r, rctx, body, tgt)
        body.append(Assign(f"{acc}[{idx}]" if size else acc, value))
        return f"{acc}[{idx}]" if size else acc

    def scan_point(self, st: Step, r: Reduce, ctx: Ctx, body: list, tgt: str) -> str:
        """At one point of the walk (the scan axis bound in `ctx`): fold the body at
        k = j + shift into the running value `tgt`; returns the point's value. An exclusive
        scan's empty window adds no term (its load is never made) and is 0 for max/min."""
        pre, lang = st.scan, self.lang
        j = ctx.axes[pre.axis]
        kctx = ctx.child()
        kctx.axes[r.axes[0].name] = j if not pre.shift else f"({j} + ({pre.shift}))"
        _, ident, combine, to_acc = lang.acc(r)
        term = to_acc.format(self.ex(r.body, kctx))
        nonempty = self.ex(pre.nonempty, ctx) if pre.shift else None
        if nonempty:
            term = lang.expr.where(nonempty, term, ident)
        body.append(Assign(tgt, combine.format(a=tgt, b=term)))
        if nonempty and r.op in ("max", "min"):
            return lang.expr.where(nonempty, tgt, lang.zero)
        return tgt

    def scan_nest(self, st: Step, ctx: Ctx, out: list, jpos: int) -> list:
        """`spatial_nest` with the scan axis' loop sequential and, for a reverse scan,
        walked from its last element down; the innermost other loop stays `omp simd`."""
        body = out
        maps_by_pos: dict[int, list[AxisMap]] = {}
        for m in st.spatial:
            lp = self.block_of(m)
            if lp is None:
                self.value(m, ctx, body, None)
            else:
                maps_by_pos.setdefault(lp.pos, []).append(m)
        order = sorted(maps_by_pos)
        for n, pos in enumerate(order):
            ms = maps_by_pos[pos]
            lp = self.block_of(ms[0])
            for m in ms:
                self.bounds(m, ctx, body)
            inner: list = []
            hi = self.block_bound(ms[0], lp, ctx)
            if pos == jpos and st.scan.reverse:
                body.append(For(f"b{pos}_r", hi, inner, "seq", unroll=lp.unroll))
                inner.append(Decl(f"b{pos}", "i64", f"({hi}) - 1 - b{pos}_r"))
            else:
                kind = "simd" if n == len(order) - 1 and pos != jpos else "seq"
                body.append(For(f"b{pos}", hi, inner, kind, vector=lp.vector,
                                unroll=lp.unroll))
            body = inner
            for m in ms:
                self.value(m, ctx, body, f"b{pos}")
        return body

    def online(self, st: Step, r: Reduce, ctx: Ctx, out: list, size, idx, acc) -> str:
        lang = self.lang
        mname = f"val_{st.online_max}"
        out.append(Decl(mname, "f32", None if size else lang.ident["max"], size))
        rctx = ctx.child()
        body = self.spatial_nest(st, rctx, out, simd_inner=False)
        m, s = self.fresh("m"), self.fresh("s")
        body.append(Decl(m, "f32", lang.ident["max"]))
        body.append(Decl(s, "f32", lang.ident["sum"]))
        inner = self.reduce_loops(st, r, rctx, body, False, None)
        x = self.fresh("x")
        inner.append(Decl(x, "f32", self.ex(r.body.x.a, rctx)))
        mn = self.fresh("mn")
        inner.append(Decl(mn, "f32", f"{lang.expr.maximum}({m}, {x})"))
        e = lang.expr.unary["exp"]
        inner.append(Assign(s, f"{s} * {e(f'{m} - {mn}')} + {e(f'{x} - {mn}')}"))
        inner.append(Assign(m, mn))
        body.append(Assign(f"{mname}[{idx}]" if size else mname, m))
        body.append(Assign(f"{acc}[{idx}]" if size else acc, s))
        ctx.locals[st.online_max] = f"{mname}[{idx}]" if size else mname
        return f"{acc}[{idx}]" if size else acc

    def store(self, st: Step, val: str, ctx: Ctx, body: list) -> None:
        out = st.stage.out
        off = linear_offset(st.stage.store_index, out.shape, lambda e: self.ex(e, ctx))
        cast = self.lang.store_cast.get(out.dtype.name, "{}").format(val)
        if st.stage.accumulate == "sum":
            body.append(AddTo(f"{ptr(out.name)}[{off}]", cast, out.dtype.name))
            return
        body.append(Assign(f"{ptr(out.name)}[{off}]", cast))
