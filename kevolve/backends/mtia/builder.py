"""The MTIA emitter: the scalar loop tree (ScalarEmitter), with loads, stores and
contractions left open (as tokens and marks) for the staging pass, which sees the whole
program."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from ...ir.interp import eval_int
from ...ir.nodes import AxisRef, Binary, Const, Expr, Load, Reduce, Where, children
from ...plan.model import AxisMap, KernelPlan, Plan, PLoop, Step
from ..cstyle.language import CStyleLanguage
from ..cstyle.scalar import ScalarEmitter, ptr
from ..cstyle.stmts import Assign, Comment, Decl, For
from ..pyexpr import Ctx, axes_in, emit, strides

TOKEN = re.compile("\x01([LS])(\\d+)\x02")  # a load (L) or store (S) left for the Stager
MAX_DMA_DIMS = 3


@dataclass
class DimAccess:
    kind: str  # scalar | range | gather (rows picked by an index buffer over a range)
    text: str  # the scalar index, or the range's first index (of the index buffer: gather)
    var: str | None = None  # block loop variable of a range
    size: int = 0  # static (padded) extent of a range
    index: object = None  # gather: the ir Buffer holding the row indices
    clamp: str | None = None  # a `where` guard's limit on the range's length


@dataclass
class Access:
    store: bool
    buf: object  # ir Buffer
    dims: list[DimAccess] | None  # None: not a rectangular slab
    offset: str  # flat element offset (direct access)
    step: str
    value: str = ""
    add: bool = False  # an accumulating store: p[off] += value, atomic across PEs


@dataclass
class DotSite:
    assign: Assign
    raw: str  # the assignment's value before tokens are resolved
    acc: str
    ldc: int
    m_loop: For
    n_loop: For


class MtiaEmitter(ScalarEmitter):
    """The scalar loop tree of one program, with its memory accesses left for staging."""

    def __init__(self, plan: Plan, k: KernelPlan, lang: CStyleLanguage, dims: dict[str, int]):
        super().__init__(plan, k, lang)
        self.dims = dims
        self.xlang = replace(lang.expr, load=self._load)
        self.accesses: list[Access] = []
        self.axis_info: dict[str, DimAccess] = {}  # axis value var -> its range
        self.loop_meta: dict[str, tuple[PLoop, AxisMap]] = {}  # loop var -> loop, axis map
        self.dots: dict[int, DotSite] = {}
        self._ctx: list[Ctx] = []
        self._cond: set = set()
        self._clamp: dict = {}
        self._step = ""
        root_maps = k.steps[-1].spatial
        for lp in k.loops:
            m = next((mm for mm in root_maps if lp.name in mm.loops), None)
            if m is not None and lp.role == "block":
                self.loop_meta[f"b{lp.pos}"] = (lp, m)
            elif m is not None and lp.role == "seq":
                self.loop_meta[f"s_{lp.name}"] = (lp, m)

    # -- expressions: loads become tokens, resolved once the loop tree is complete --------
    def ex(self, e: Expr, ctx: Ctx) -> str:
        self._ctx.append(ctx)
        saved = self._cond, self._clamp
        cond, clamp = _guarded_loads(e)
        self._cond, self._clamp = saved[0] | cond, {**saved[1], **clamp}
        try:
            return emit(e, ctx, self.xlang, ptr)
        finally:
            self._ctx.pop()
            self._cond, self._clamp = saved

    def _load(self, p: str, off: str, mask, ld: Load) -> str:
        ctx = self._ctx[-1]
        dims = None if ld in self._cond else self._slab(ld.index, ctx, self._clamp.get(ld))
        self.accesses.append(Access(False, ld.buffer, dims, off, self._step))
        return f"\x01L{len(self.accesses) - 1}\x02"

    def _slab(self, index: tuple[Expr, ...], ctx: Ctx, clamp=None) -> list[DimAccess] | None:
        """The box a load or store touches, or None. `clamp` = (axis, limit): the access
        sits under `where(axis < limit, ...)`, so its range over that axis is cut there."""
        out, seen = [], set()
        for e in index:
            d = self._dim(e, ctx)
            if d is None or (d.kind != "scalar" and d.var in seen):
                return None
            if d.kind != "scalar":
                seen.add(d.var)
            out.append(d)
        if clamp is not None:
            info = self.axis_info.get(ctx.axes.get(clamp[0]))
            k = next((j for j, d in enumerate(out) if info is not None and d.kind == "range"
                      and d.var == info.var), None)
            if k is None:
                return None
            lim = f"({self._text(clamp[1], ctx)}) - ({info.text})"
            out[k] = replace(out[k], clamp=lim)
        box = [d.kind for d in out if d.kind != "scalar"]
        if "gather" in box and (box[0] != "gather" or len(box) > 2 or box.count("gather") > 1):
            return None  # the gather DMA moves rows: its index picks the outer dim
        return out if 0 < len(box) <= MAX_DMA_DIMS else None

    def _dim(self, e: Expr, ctx: Ctx) -> DimAccess | None:
        ranged = [a for a in axes_in(e) if ctx.axes.get(a) in self.axis_info]
        if not ranged:
            return DimAccess("scalar", self._text(e, ctx))
        if len(ranged) != 1:
            return None
        info = self.axis_info[ctx.axes[ranged[0]]]
        if isinstance(e, AxisRef):
            return info
        if isinstance(e, Load) and len(e.index) == 1 and e.buffer.name not in ctx.locals \
                and e not in self._cond:
            inner = self._dim(e.index[0], ctx)
            if inner is not None and inner.kind == "range":
                return replace(inner, kind="gather", index=e.buffer)
            return None
        if isinstance(e, Binary) and e.op in ("add", "sub"):
            for ax, other, sign in ((e.a, e.b, e.op), (e.b, e.a, "add" if e.op == "add" else
                                                          None)):
                if isinstance(ax, AxisRef) and sign and not (set(axes_in(other)) & set(ranged)):
                    op = "+" if sign == "add" else "-"
                    return replace(info, text=f"({info.text}) {op} ({self._text(other, ctx)})")
        return None

    def _text(self, e: Expr, ctx: Ctx) -> str:
        return emit(e, ctx, self.xlang, ptr)

    # -- axis values and loops: remember which block loop a value ranges over -------------
    def value(self, m: AxisMap, ctx: Ctx, out: list, block_var: str | None) -> None:
        super().value(m, ctx, out, block_var)
        if block_var is None or m.fused:
            return
        st = ctx.axes[f"__start_{m.axis.name}"]
        local = self.outer_part(m)
        base = st if local == "0" else local if st == "0" else f"{st} + {local}"
        size = next(lp.size for ln in m.loops if (lp := self._ploop(ln)) is not None
                    and lp.role == "block")
        self.axis_info[ctx.axes[m.axis.name]] = DimAccess("range", base, block_var, size)

    def _ploop(self, name: str) -> PLoop | None:
        if name in self.loops:
            return self.loops[name]
        for st in self.k.steps:
            for lp in st.reduce_loops:
                if lp.name == name:
                    return lp
        return None

    def reduce_loops(self, st: Step, r: Reduce, ctx: Ctx, out: list, simd: bool, red):
        body = super().reduce_loops(st, r, ctx, out, simd, red)
        for m in st.reduce:
            if m.axis in r.axes:
                for ln in m.loops:
                    self.loop_meta[self.var[ln]] = (self._ploop(ln), m)
        return body

    # -- steps ----------------------------------------------------------------------------
    def step(self, st: Step, pctx: Ctx, out: list) -> None:
        self._step = st.stage.name
        if st.is_root or st.store_out or not isinstance(st.body, Reduce) or \
                st.strategy == "online":
            super().step(st, pctx, out)
            return
        # A stage that is one reduction keeps its value in the accumulator (no copy).
        out.append(Comment(f"stage {st.stage.name} ({st.strategy})"))
        ctx = Ctx(locals=pctx.locals)
        size, idx = self.local_index(st)
        pctx.locals[st.stage.name] = self.reduce(st, st.body, ctx, out, size, idx)

    def reduce(self, st: Step, r: Reduce, ctx: Ctx, out: list, size, idx) -> str:
        n0 = len(out)
        ref = super().reduce(st, r, ctx, out, size, idx)
        if st.strategy == "dot" and r is st.body and not self.reduce_inner(st, r) and size:
            self._mark_dot(st, out[n0:], ref)
        return ref

    def _mark_dot(self, st: Step, new: list, ref: str) -> None:
        """Find the loop nest k-chunk > m > n > (acc += a * b) and remember it: the Stager
        turns it into one kv_dot call when both operands are staged tiles."""
        kblk = [lp for lp in st.reduce_loops if lp.role == "block"]
        ps = self.positions(st)
        if len(kblk) != 1 or [p for p, _ in ps] != [0, 1]:
            return
        kvar = self.var[kblk[0].name]
        fk = next((f for f in _fors(new) if f.var == kvar), None)
        chain = [fk]
        while chain[-1] is not None and len(chain) < 4:
            fors = [s for s in chain[-1].body if isinstance(s, For)]
            chain.append(fors[0] if len(fors) == 1 and len(chain[-1].body) ==
                         len(fors) + sum(isinstance(s, Decl) for s in chain[-1].body) else None)
        if None in chain[:3]:
            return
        fm, fn = chain[1], chain[2]
        assigns = [s for s in fn.body if isinstance(s, Assign)]
        if fm.var != "b0" or fn.var != "b1" or len(assigns) != 1 or \
                any(isinstance(s, For) for s in fn.body):
            return
        acc = ref.split("[")[0]
        self.dots[id(fk)] = DotSite(assigns[0], assigns[0].value, acc, ps[1][1], fm, fn)

    def store(self, st: Step, val: str, ctx: Ctx, body: list) -> None:
        out = st.stage.out
        self._ctx.append(ctx)
        try:
            dims = self._slab(st.stage.store_index, ctx)
            if dims is not None and (any(d.kind == "gather" for d in dims)
                                     or st.stage.accumulate):
                dims = None  # a scatter (or an add other PEs share): stored directly
            terms = []
            for i, s in zip(st.stage.store_index, strides(out.shape)):
                t = self._text(i, ctx)
                terms.append(t if s == Const(1) else f"{t} * {self._text(s, ctx)}")
        finally:
            self._ctx.pop()
        off = " + ".join(f"({t})" for t in terms) if terms else "0"
        value = self.lang.store_cast.get(out.dtype.name, "{}").format(val)
        self.accesses.append(Access(True, out, dims, off, st.stage.name, value,
                                    st.stage.accumulate == "sum"))
        body.append(Assign(f"\x01S{len(self.accesses) - 1}\x02", value))

    # -- estimate support ----------------------------------------------------------------
    def trips(self, var: str) -> float:
        """Average trip count of a program's loop over `var` at the shape class."""
        if var not in self.loop_meta:
            return 1.0
        lp, m = self.loop_meta[var]
        bound = eval_int(m.axis.bound, self.dims)
        counts = []
        for k, ln in enumerate(m.loops):
            q = self._ploop(ln)
            s = m.strides[k]
            if q is not None and q.role == "block":
                counts.append(None)
            elif k == 0:
                counts.append(math.ceil(bound / s))
            else:
                counts.append(m.strides[k - 1] / s)
        i = m.loops.index(lp.name)
        if counts[i] is not None:
            return float(counts[i])
        if not m.masked:
            return float(lp.size)
        others = math.prod(c for j, c in enumerate(counts) if j != i and c is not None)
        return float(min(lp.size, bound / max(others, 1)))


def _guarded_loads(e: Expr) -> tuple[set, dict]:
    """Loads evaluated only on one side of a `where` (their slabs may lie out of bounds),
    and of those, the ones guarded by `where(axis < limit, load, ...)`: {load: (axis,
    limit)}, which can be staged with the range over `axis` cut at `limit`."""
    cond, plain, guards = set(), set(), {}

    def go(x: Expr, guard) -> None:
        if isinstance(x, Load):
            if guard is None:
                plain.add(x)
            elif guard == "cond" or guards.setdefault(x, guard) != guard:
                cond.add(x)
        if isinstance(x, Reduce):
            return
        if isinstance(x, Where):
            go(x.cond, guard)
            g = "cond"
            c = x.cond
            if guard is None and isinstance(c, Binary) and c.op == "lt" and \
                    isinstance(c.a, AxisRef):
                g = (c.a.axis.name, c.b)
            go(x.a, g)
            go(x.b, "cond")
            return
        for ch in children(x):
            go(ch, guard)
    go(e, None)
    clamp = {ld: g for ld, g in guards.items() if ld not in cond and ld not in plain}
    return cond - plain, clamp


def _fors(stmts: list):
    for s in stmts:
        if isinstance(s, For):
            yield s
            yield from _fors(s.body)
