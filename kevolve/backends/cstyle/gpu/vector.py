"""Per-thread vector loads and stores where a schedule vectorizes (CUDA and HIP).

`vectorize` on a block loop with width W: on the generic path each thread then handles W
consecutive elements of that loop's axis (a *vector point*) instead of one. A load that
reads those W elements consecutively becomes one access of a vector type (`float4`,
`__nv_bfloat162`, ...: the language's `vectors` table) into a small register array; the
W lanes (printed unrolled, so the arrays stay registers) compute their values from it,
and a contiguous store writes them back as one access. A vectorized reduce block (a
softmax row, after a `reduction` move) strides its lanes by W and reads W elements per
access the same way.

Each access is vectorized only where that is legal for the plan's shape class; anything
else stays scalar, with a comment in the source that says why:

- the vectorized axis `a` is the last index of the load (store) with unit stride (`a` or
  `a + c`) and no other index depends on it;
- whole vectors only: W divides the axis' extent (a launch guard when it is symbolic);
- the first lane's offset is a multiple of W: constant offsets and the axis start are, and
  the buffer's rows (its last extent) are multiples of W (a launch guard), and the base
  pointer is aligned to the access size (checked at launch);
- a load under `where` is read only where its condition holds, which must not depend on
  the vectorized axis (it is evaluated once per vector)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ....ir.interp import InterpError, eval_int
from ....ir.nodes import AxisRef, Binary, Const, Expr, Load, Reduce, Unary, Where, children, walk
from ....plan.model import AxisMap, PLoop, Step
from ....plan.walk import reduces_in
from ...pyexpr import Ctx, linear_offset
from ..stmts import Assign, Comment, Decl, If, Line, Unroll

MAX_ACCESS = 16  # bytes: the widest load or store one instruction makes (sm_90, gfx9)
# bf16/f16 lanes are raw 16-bit patterns in registers (the module templates' helpers)
_BITS = {"bf16": "kv_bf16_bits_f32({})", "f16": "kv_f16_bits_f32({})"}


@dataclass(frozen=True)
class Access:
    """W lanes of `ld` read (or written) as `count` accesses of `vtype`, `lanes` each."""

    ld: Load
    vtype: str
    lanes: int
    count: int
    align: int  # bytes the base pointer must be aligned to
    conds: tuple[tuple[Expr, bool], ...] = ()  # where() conditions (cond, branch taken)
    guard: tuple[Expr, str] | None = None  # the row length the offset relies on


@dataclass
class VecStep:
    """How a step's points are grouped into vectors along its innermost block position."""

    loop: PLoop
    pos: int
    width: int
    map: AxisMap
    loads: dict[Load, Access]
    store: Access | None
    guards: list[tuple[Expr, str]] = field(default_factory=list)
    scalar: list[str] = field(default_factory=list)  # accesses left scalar, and why


@dataclass
class VecReduce:
    """A vectorized reduce block: W elements per access along the reduce axis."""

    width: int
    map: AxisMap
    loads: dict[Load, Access]


def refs(e: Expr, axis: str) -> bool:
    """Whether `e` mentions axis `axis`."""
    return any(isinstance(n, AxisRef) and n.axis.name == axis for n in walk(e))


def _const(e: Expr) -> int | None:
    if isinstance(e, Const) and isinstance(e.value, int):
        return e.value
    if isinstance(e, Unary) and e.op == "neg" and (v := _const(e.x)) is not None:
        return -v
    return None


def _unit(last: Expr, axis: str) -> tuple[bool, int | None]:
    """(whether `last` is `axis` or `axis +- c` with c free of it, c as an int if known)."""
    def is_axis(e):
        return isinstance(e, AxisRef) and e.axis.name == axis
    if is_axis(last):
        return True, 0
    if isinstance(last, Binary) and last.op in ("add", "sub"):
        x, y = last.a, last.b
        if is_axis(x) and not refs(y, axis):
            c = _const(y)
            return True, (c if last.op == "add" or c is None else -c)
        if last.op == "add" and is_axis(y) and not refs(x, axis):
            return True, _const(x)
    return False, None


def loads_with_conds(e: Expr) -> dict[Load, list[tuple]]:
    """Every load of `e` outside reductions, with the where() conditions around each
    occurrence (C's `?:` evaluates only the branch taken)."""
    out: dict[Load, list[tuple]] = {}

    def go(x: Expr, conds: tuple) -> None:
        if isinstance(x, Reduce):
            return
        if isinstance(x, Load):
            out.setdefault(x, []).append(conds)
            for i in x.index:
                go(i, conds)
            return
        if isinstance(x, Where):
            go(x.cond, conds)
            go(x.a, conds + ((x.cond, True),))
            go(x.b, conds + ((x.cond, False),))
            return
        for c in children(x):
            go(c, conds)
    go(e, ())
    return out


def split_lanes(vectors: dict, dtype, width: int) -> tuple[str, int] | None:
    """(vector type, lanes per access): the widest type of at most 16 bytes dividing W."""
    table = vectors.get(dtype.name, {})
    for lanes in sorted(table, reverse=True):
        if lanes <= width and width % lanes == 0 and lanes * dtype.itemsize <= MAX_ACCESS:
            return table[lanes], lanes
    return None


class Vectors:
    """Vector accesses of one kernel: legality per step and per load, the launch guards
    they need, and the statements that read and write whole vectors."""

    def __init__(self, b):
        self.b = b
        self.dims = b.plan.dims_dict
        self.guards: list[tuple[Expr, str]] = []  # shape guards over dims
        self.aligned: dict[str, int] = {}  # buffer -> bytes its base pointer needs
        self.used = False

    # -- legality ------------------------------------------------------------------------
    def access(self, ld: Load, m: AxisMap, width: int, occurrences: list[tuple]) -> Access | str:
        """The vector access of `ld` along `m`'s axis, or why it stays scalar."""
        a, buf = m.axis.name, ld.buffer.name
        split = split_lanes(self.b.lang.vectors, ld.buffer.dtype, width)
        if split is None:
            return f"{buf}: no {width}-lane {ld.buffer.dtype} vector type"
        *rest, last = ld.index
        unit, shift = _unit(last, a) if ld.index else (False, None)
        if not unit or any(refs(e, a) for e in rest):
            return f"{buf}: not unit-stride along {a}"
        start = _const(m.axis.start)
        if shift is None or start is None or (shift + start) % width:
            return f"{buf}: first lane not a multiple of {width} elements"
        guard = None
        if rest:
            row = ld.buffer.shape[-1]
            try:
                n = eval_int(row, self.dims)
            except InterpError:
                return f"{buf}: row length unknown"
            if n % width:
                return f"{buf}: rows of {n} elements, not a multiple of {width}"
            if _const(row) is None:
                guard = (Binary("eq", Binary("mod", row, Const(width)), Const(0)),
                         f"{buf}: rows must be a multiple of {width} elements (vectorize)")
        conds = occurrences[0]
        if any(o != conds for o in occurrences):
            if any(not o for o in occurrences):
                conds = ()
            else:
                return f"{buf}: read under different where() conditions"
        if any(refs(c, a) for c, _ in conds):
            return f"{buf}: its where() condition depends on {a}"
        vtype, lanes = split
        return Access(ld, vtype, lanes, width // lanes, lanes * ld.buffer.dtype.itemsize,
                      tuple(conds), guard)

    def extent_guard(self, m: AxisMap, width: int, size: int, what: str):
        """Whole vectors: [] or the guard that W divides the axis' extent; a str: why not."""
        if size % width:
            return f"a tile of {size} is not a multiple of {width}"
        if not m.masked:
            return []
        a = m.axis
        if a.is_jagged:
            return f"{a.name}'s extent varies per segment (jagged)"
        try:
            n = eval_int(a.extent, self.dims)
        except InterpError:
            return f"{a.name}'s extent is unknown"
        if n % width:
            return f"{a.name}'s extent {n} is not a multiple of {width}"
        if _const(a.extent) is not None:
            return []
        return [(Binary("eq", Binary("mod", a.extent, Const(width)), Const(0)),
                 f"{what}.{a.name}: extent must be a multiple of {width} (vectorize)")]

    def accesses(self, exprs, m: AxisMap, width: int, locals_) -> tuple[dict, list[str]]:
        """Vector accesses for the loads of `exprs` that depend on `m`'s axis; reasons
        for the ones that stay scalar. Stages computed in the program (`locals_`) are read
        from registers or shared memory, not loaded."""
        found: dict[Load, list[tuple]] = {}
        for e in exprs:
            for ld, occ in loads_with_conds(e).items():
                found.setdefault(ld, []).extend(occ)
        out, why = {}, []
        for ld, occ in found.items():
            if not refs(ld, m.axis.name) or ld.buffer.name in locals_:
                continue
            if ld in self.b.tiles.reads:
                why.append(f"{ld.buffer.name}: read from a shared-memory tile")
                continue
            acc = self.access(ld, m, width, occ)
            if isinstance(acc, str):
                why.append(acc)
            else:
                out[ld] = acc
        return out, why

    def plan(self, st: Step, pctx: Ctx, out: list) -> VecStep | None:
        """The vector grouping of a step's points, or None (a comment says why when the
        schedule asked for one)."""
        b = self.b
        ps = dict(b.positions(st))
        vloops = [lp for lp in b.k.loops if lp.role == "block" and lp.vector
                  and lp.vector > 1 and lp.pos in ps]
        if not vloops:
            return None
        lp = max(vloops, key=lambda x: x.pos)
        res = self.step_plan(st, lp, pctx)
        if isinstance(res, str):
            out.append(Comment(f"vectorize {lp.name} x{lp.vector}: scalar code for stage "
                               f"{st.stage.name} ({res})"))
            return None
        return res

    def step_plan(self, st: Step, lp: PLoop, pctx: Ctx) -> VecStep | str:
        b = self.b
        W = lp.vector
        if lp.pos != max(p for p, _ in b.positions(st)):
            return "not the innermost tile position of this stage"
        maps = [m for m in st.spatial if b.block_of(m) is lp]
        if len(maps) != 1:
            return f"{len(maps)} axes on one tile position"
        m = maps[0]
        if m.strides[m.loops.index(lp.name)] != 1:
            return "the tile is not unit-stride"
        guards = self.extent_guard(m, W, lp.size, st.stage.name)
        if isinstance(guards, str):
            return guards
        if st.strategy == "online":
            return "online reductions keep one value per thread"
        for rm in st.reduce:
            if any(refs(e, m.axis.name) for e in (rm.axis.start, rm.axis.extent)):
                return f"the bounds of {rm.axis.name} depend on {m.axis.name}"
        reds = reduces_in(st.body)
        loads, why = self.accesses([st.body] + [r.body for r in reds], m, W, pctx.locals)
        store = None
        if st.is_root and st.stage.accumulate:
            why.append("an accumulating store (one atomic add per element)")
        elif st.is_root:
            o = st.stage.out
            s = self.access(Load(o, st.stage.store_index), m, W, [()])
            if isinstance(s, str):
                why.append(f"store to {s}")
            else:
                store = s
        if not loads and store is None:
            return "; ".join(why) or "nothing it reads or writes depends on " + m.axis.name
        return VecStep(lp, lp.pos, W, m, loads, store, guards, why)

    def reduce_plan(self, st: Step, r: Reduce, pctx: Ctx, out: list) -> VecReduce | None:
        """The vectorized innermost reduce block of `r`, or None (with a comment when the
        schedule asked for one)."""
        blocks = [(m, lp) for m in st.reduce if m.axis in r.axes for lp in st.reduce_loops
                  if lp.name in m.loops and lp.role == "block"]
        if not blocks or not (blocks[-1][1].vector or 0) > 1:
            return None
        m, lp = blocks[-1]
        W = lp.vector
        res = self.extent_guard(m, W, lp.size, st.stage.name)
        loads, why = {}, []
        if not isinstance(res, str):
            if m.strides[m.loops.index(lp.name)] != 1:
                res = "the tile is not unit-stride"
            else:
                body = r.body.x.a if st.strategy == "online" and r is st.body else r.body
                loads, why = self.accesses([body], m, W, pctx.locals)
                if not loads:
                    res = "; ".join(why) or f"nothing it reads depends on {m.axis.name}"
        if isinstance(res, str):
            out.append(Comment(f"vectorize {lp.name} x{W}: scalar code for stage "
                               f"{st.stage.name} ({res})"))
            return None
        self.require(res, loads.values())
        parts = [f"{a.ld.buffer.name} ({a.count} x {a.vtype})" for a in loads.values()]
        scalar = f"; scalar: {'; '.join(why)}" if why else ""
        out.append(Comment(f"vectorize {lp.name} x{W}: vector loads {', '.join(parts)}"
                           f"{scalar}"))
        return VecReduce(W, m, loads)

    def require(self, guards, accs) -> None:
        """Record the launch guards and pointer alignments these accesses rely on."""
        self.used = True
        for g in list(guards) + [a.guard for a in accs if a.guard]:
            if g not in self.guards:
                self.guards.append(g)
        for a in accs:
            n = a.ld.buffer.name
            self.aligned[n] = max(self.aligned.get(n, 0), a.align)

    # -- statements ----------------------------------------------------------------------
    def note(self, st: Step, vs: VecStep, out: list) -> None:
        """Say in the source what moves as vectors (once per step)."""
        self.require(vs.guards, list(vs.loads.values()) + ([vs.store] if vs.store else []))
        parts = [f"{a.ld.buffer.name} ({a.count} x {a.vtype})" for a in vs.loads.values()]
        store = f"; store {vs.store.ld.buffer.name} ({vs.store.count} x {vs.store.vtype})" \
            if vs.store else ""
        scalar = f"; scalar: {'; '.join(vs.scalar)}" if vs.scalar else ""
        out.append(Comment(f"vectorize {vs.loop.name} x{vs.width}: vector loads "
                           f"{', '.join(parts) or '(none)'}{store}{scalar}"))

    def array(self, out: list, dtype, n: int, align: int, base: str) -> str:
        """A register array for W lanes (16-bit floats as their bit patterns)."""
        name = self.b.fresh(base)
        t = "unsigned short" if dtype.name in _BITS else self.b.lang.ptr_type(dtype)
        out.append(Line(f"__align__({align}) {t} {name}[{n}];"))
        return name

    def copies(self, acc: Access, dst: str, src: str) -> list:
        """The statements moving W lanes from `src` to `dst`: one `kv_vcopy<V>` per access
        (a W wider than 16 bytes takes several)."""
        step = acc.lanes
        return [Line(f"kv_vcopy<{acc.vtype}>({_plus(dst, i * step)}, {_plus(src, i * step)});")
                for i in range(acc.count)]

    def hoist(self, accs, width: int, ctx: Ctx, out: list, w: str) -> dict[Load, str]:
        """Read each access' W lanes at the first lane's values in `ctx` (under its where()
        conditions); returns each load's value in lane `w`."""
        b = self.b
        lanes = {}
        for acc in accs:
            ld = acc.ld
            arr = self.array(out, ld.buffer.dtype, width, acc.align, "v")
            off = linear_offset(ld.index, ld.buffer.shape, lambda e: b.ex(e, ctx))
            cp = self.copies(acc, arr, f"p_{ld.buffer.name} + {off}")
            if acc.conds:
                conds = [b.ex(c, ctx) if pos else b.lang.expr.unary["not"](b.ex(c, ctx))
                         for c, pos in acc.conds]
                out.append(If(" && ".join(f"({c})" for c in conds), cp))
            else:
                out.extend(cp)
            lanes[ld] = _BITS.get(ld.buffer.dtype.name, "{}").format(f"{arr}[{w}]")
        return lanes

    def lanes(self, vs: VecStep, ctx: Ctx, out: list, exprs) -> tuple[list, Ctx, str]:
        """Hoist the vector loads `exprs` read, then open the lanes: (their body, a context
        with the lane's axis value and loads, the lane variable). Inside, `b<pos>` is
        redeclared as the lane's coordinate, so computed-at arrays index per lane."""
        b = self.b
        w = b.fresh("w")
        mine = {ld for e in exprs for ld in loads_with_conds(e)}
        lanes = self.hoist([a for ld, a in vs.loads.items() if ld in mine], vs.width, ctx,
                           out, w)
        base = b.fresh("bv")
        out.append(Decl(base, "i64", f"b{vs.pos}"))
        body: list = []
        out.append(Unroll(w, vs.width, body))
        body.append(Decl(f"b{vs.pos}", "i64", f"{base} + {w}"))
        lctx = ctx.child()
        b.value(vs.map, lctx, body, f"b{vs.pos}")
        lctx.loads.update(lanes)
        return body, lctx, w

    def reduce_lanes(self, vr: VecReduce, ctx: Ctx, inner: list) -> list:
        """Inside a vectorized reduce block (the loop variable at the vector's first
        element): vector loads, then the lanes; `ctx` now names the lane's values."""
        b = self.b
        w = b.fresh("w")
        lanes = self.hoist(vr.loads.values(), vr.width, ctx, inner, w)
        body: list = []
        inner.append(Unroll(w, vr.width, body))
        a = vr.map.axis.name
        v = b.fresh(f"{a}_")
        body.append(Decl(v, "i64", f"{ctx.axes[a]} + {w}"))
        ctx.axes[a] = v
        ctx.loads.update(lanes)
        return body

    def acc_decl(self, name: str, ident: str, width: int, ctype: str = "float") -> Line:
        """One accumulator per lane."""
        return Line(f"{ctype} {name}[{width}] = {{{', '.join([ident] * width)}}};")

    def finish(self, st: Step, pctx: Ctx, ctx: Ctx, body: list, out: list,
               vs: VecStep) -> None:
        """The step's W values of a vector point: the root stores them (one vector store
        where legal), a step computed at the root writes its shared array per lane."""
        b = self.b
        reds = reduces_in(st.body)
        o = None
        if st.is_root and vs.store is not None:
            o = self.array(body, st.stage.out.dtype, vs.width, vs.store.align, "o")
        lane, lctx, w = self.lanes(vs, ctx, body, [st.body])
        for r in reds:
            lctx.reduces[r] = f"{ctx.reduces[r]}[{w}]"
        val = b.ex(st.body, lctx)
        if not st.is_root:
            size, idx = b.local_index(st)
            name = f"val_{st.stage.name}"
            b.shared_array(name, "float", size)
            lane.append(Assign(f"{name}[{idx}]", val))
            if st.store_out:  # an output computed here: stored as well as kept
                b.store(st, f"{name}[{idx}]", lctx, lane)
            pctx.locals[st.stage.name] = f"{name}[{idx}]"
            out.append(Line(b.lang.barrier))
            return
        if o is None:
            b.store(st, val, lctx, lane)
            return
        out_b = st.stage.out
        val = b.lang.store_cast.get(out_b.dtype.name, "{}").format(val)
        lane.append(Assign(f"{o}[{w}]", f"kv_bits({val})" if out_b.dtype.name in _BITS
                           else val))
        off = linear_offset(st.stage.store_index, out_b.shape, lambda e: b.ex(e, ctx))
        body.extend(self.copies(vs.store, f"p_{out_b.name} + {off}", o))


def _plus(base: str, k: int) -> str:
    return base if k == 0 else f"{base} + {k}"
