"""Triton rendering: grid loops become one flattened `tl.program_id(0)`, blocks become
`tl.arange` tensors at their layout position, tails and jagged bounds become masks,
reductions become `tl.sum/max/min(..., keep_dims=True)` over a block, contractions `tl.dot`.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import dtypes as dt
from ...ir.interp import InterpError, eval_int
from ...ir.nodes import (
    AxisRef,
    Const,
    Dim,
    Expr,
    Load,
    Op,
    Reduce,
    dtype_of,
    op_dims,
    product_factors,
    substitute_axes,
    walk,
)
from ...plan.model import AxisMap, KernelPlan, Plan, PLoop, Step
from ...plan.walk import grid_count, grid_decode, levels, reduces_in, reversed_loops, scan_map
from ..pyexpr import Ctx, PyLang, axes_in, emit, linear_offset, mask_of, py_float
from . import bulk, gelu

TL = {"f32": "tl.float32", "f16": "tl.float16", "bf16": "tl.bfloat16", "i32": "tl.int32",
      "i64": "tl.int64", "i8": "tl.int8", "f64": "tl.float64", "bool": "tl.int1"}
TORCH = {k: f"torch.{dt.TORCH_NAMES[k]}" for k in dt.BUFFER_DTYPES}  # as generated code spells them
IDENT = {"sum": "0.0", "max": "float('-inf')", "min": "float('inf')", "prod": "1.0"}
INT_IDENT = {"sum": "0", "max": "-9223372036854775808", "min": "9223372036854775807",
             "prod": "1"}


def acc_type(r: Reduce) -> tuple[str, str, str]:
    """(Triton type, identity, zero) of `r`'s accumulator: f32 for a float body, int64 for
    an integer one (an f32 sum of integers is exact only to 2^24)."""
    if dtype_of(r.body).is_float:
        return "tl.float32", IDENT[r.op], "0.0"
    return "tl.int64", INT_IDENT[r.op], "0"
COMBINE = {"sum": "{a} + {b}", "max": "tl.maximum({a}, {b})", "min": "tl.minimum({a}, {b})",
           "prod": "{a} * {b}"}


def _load(raw: bool):
    def f(ptr: str, off: str, mask: str | None, ld: Load) -> str:
        m = f", mask={mask}, other=0" if mask else ""
        code = f"tl.load({ptr} + {off}{m})"
        if not raw and ld.buffer.dtype in (dt.f16, dt.bf16):
            code += ".to(tl.float32)"
        return code
    return f


def _lang(raw: bool = False) -> PyLang:
    u = {"exp": "tl.exp({})", "log": "tl.log({})", "sqrt": "tl.sqrt({})",
         "rsqrt": "tl.rsqrt({})", "sigmoid": "tl.sigmoid({})", "erf": "tl.erf({})",
         "abs": "tl.abs({})", "tanh": "(2.0 * tl.sigmoid(2.0 * ({})) - 1.0)", "not": "(~{})",
         "sin": "tl.sin({})", "cos": "tl.cos({})", "floor": "tl.floor({})",
         "ceil": "tl.ceil({})", "trunc": "tl.where(({0}) < 0, tl.ceil({0}), tl.floor({0}))",
         # half to even: floor(x + 1/2), less one where x was a tie and that is odd
         "round": "(tl.floor(({0}) + 0.5) - ((tl.floor(({0}) + 0.5) - ({0}) == 0.5)"
                  " & (tl.floor(({0}) + 0.5) % 2.0 != 0.0)).to(tl.float32))",
         "log1p": "tl.log(1.0 + ({}))", "expm1": "(tl.exp({}) - 1.0)"}
    return PyLang(unary={k: v.format for k, v in u.items()}, maximum="tl.maximum",
                  minimum="tl.minimum", where=lambda c, a, b: f"tl.where({c}, {a}, {b})",
                  load=_load(raw),
                  cast=lambda c, t: f"tl.cast({c}, {TL[t.name]})",
                  float_const=lambda v: py_float(v, "float('inf')", "float('nan')"),
                  one_plus_erf=gelu.one_plus_erf, gauss_gate=gelu.gauss_gate,
                  power=_power,
                  spread=lambda off, m: f"({off}) + tl.zeros_like(({m}).to(tl.int32))")


def _power(a: str, b: str, floating: bool) -> str:
    """A general power as exp2(b * log2(a)): the same spelling on a GPU and in Triton's
    interpreter (which has no libdevice); defined for a > 0 (constant integer and +-1/2
    exponents never get here: pyexpr multiplies them out or takes a square root)."""
    if not floating:
        return f"tl.exp2(({b}) * tl.log2(({a}).to(tl.float32))).to(tl.int64)"
    return f"tl.exp2(({b}) * tl.log2({a}))"


LANG, RAW = _lang(), _lang(raw=True)
# The launcher's host Python (grids, guards, sizes): builtins, not tl.*, which exists only
# inside @triton.jit functions; Python's `//` and `%` already floor.
HOST = replace(LANG, maximum="max", minimum="min", int_maximum="max", int_minimum="min",
               where=lambda c, a, b: f"(({a}) if ({c}) else ({b}))", floor_native=True)


def buffers(op: Op, plan: Plan) -> list[str]:
    return [b.name for b in op.inputs] + list(op.outputs) + list(plan.scratch)


def ptr(name: str) -> str:
    return f"p_{name}"


# Offsets are 32-bit when every buffer of the shape class has fewer elements than this
# (half of 2**31: a tile overrunning the last row, masked, must not wrap either), else
# 64-bit. 32-bit offset tiles take half the registers and cheaper address arithmetic.
NARROW_LIMIT = 1 << 30


def _buffer_shapes(op: Op, plan: Plan) -> dict[str, tuple]:
    return {n: (op.stage(n).out if n in plan.scratch else op.buffer(n)).shape
            for n in buffers(op, plan)}


def wide_offsets(op: Op, plan: Plan) -> bool:
    """64-bit offsets unless every buffer is known to be small at the plan's dims."""
    dims = plan.dims_dict
    for shape in _buffer_shapes(op, plan).values():
        n = 1
        try:
            for e in shape:
                n *= eval_int(e, dims)
        except (KeyError, ValueError, TypeError, InterpError):  # a size known at call time
            return True
        if n >= NARROW_LIMIT:
            return True
    return False


class KernelWriter:
    def __init__(self, plan: Plan, k: KernelPlan, dot_f32: bool = False, wide: bool = True):
        self.plan, self.k = plan, k
        self.dot_f32 = dot_f32
        self.wide = wide
        self.lines: list[str] = []
        self.ind = 1
        self.n = 0
        self.var: dict[str, str] = {}
        self.lang = LANG
        self.descriptors: dict[str, bulk.BulkTile] = {}  # kernel parameter -> its tile
        self.bulk_guards: list[tuple[str, str]] = []  # (condition, message) at launch
        self.carries: dict[str, str] = {}  # scan stage -> its running value
        self.reversed = reversed_loops(k)

    def w(self, s: str) -> None:
        self.lines.append("    " * self.ind + s)

    def fresh(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def ex(self, e: Expr, ctx: Ctx, lang: PyLang | None = None) -> str:
        return emit(e, ctx, lang or self.lang, ptr)

    def shape_idx(self, pos: int, rank: int | None = None) -> str:
        rank = self.k.rank if rank is None else rank
        if rank <= 1:
            return ""
        return "[" + ", ".join(":" if p == pos else "None" for p in range(rank)) + "]"

    # -- program structure ---------------------------------------------------------------
    def render(self) -> str:
        k = self.k
        self.grid()
        for lp in k.loops:
            if lp.role == "block":
                v = f"r_{lp.name}"
                self.w(f"{v} = tl.arange(0, {lp.size}){self.shape_idx(lp.pos)}")
                self.var[lp.name] = v
        root_ctx = Ctx()
        maps = {m.axis.name: m for m in k.steps[-1].spatial}
        for m in maps.values():  # grid-only axes: their values may bound the loops below
            if all(self._loop(ln).role == "grid" for ln in m.loops):
                self.axis_value(m, root_ctx)
        for lvl, steps in levels(k):
            if lvl is not None:
                for st in steps:  # a scan's running value outlives its chunk loop's trips
                    if st.scan is not None and lvl.name in scan_map(st).loops:
                        self.carry(st)
                m = next(mm for mm in maps.values() if lvl.name in mm.loops)
                self.axis_bounds(m, root_ctx)
                s = m.strides[m.loops.index(lvl.name)]
                ext = root_ctx.axes[f"__ext_{m.axis.name}"]
                v = f"s_{lvl.name}"
                trips = f"({ext} + {s - 1}) // {s}"
                if lvl.name in self.reversed:  # a reverse scan's chunks, last one first
                    self.w(f"for {v}_r in range(0, {trips}):")
                    self.ind += 1
                    self.w(f"{v} = {trips} - 1 - {v}_r")
                else:
                    self.w(f"for {v} in range(0, {trips}):")
                    self.ind += 1
                self.var[lvl.name] = v
            for st in steps:
                self.step(st, root_ctx)
        return "\n".join(self.lines)

    def grid(self) -> None:
        k = self.k
        g = k.grid
        if not g:
            return
        counts = [self.ex(grid_count(k, lp), Ctx()) for lp in g]
        wide = ".to(tl.int64)" if self.wide else ""
        if k.persistent:  # the launcher starts fewer programs; each takes every n-th tile
            total = " * ".join(f"({c})" for c in counts)
            # across tiles: Triton flattens the tile loop and the loops in it into one
            # software pipeline, so the next tile's loads are in flight during this one's
            # epilogue (gemm_bias_gelu on the H200, with bulk copies: h200-gemm-kdepth-loops)
            flat = ", flatten=True" if k.pipeline == "across_tiles" else ""
            self.w(f"for tile in tl.range(tl.program_id(0), {total}, tl.num_programs(0)"
                   f"{flat}):")
            self.ind += 1
            self.w(f"pid = tile{wide}")
        else:
            self.w(f"pid = tl.program_id(0){wide}")
        for v, e in grid_decode(k, counts, div="//", minimum="tl.minimum"):
            self.w(f"{v} = {e}")
        for lp in g:
            self.var[lp.name] = f"g_{lp.name}"

    # -- axis values ---------------------------------------------------------------------
    def axis_bounds(self, m: AxisMap, ctx: Ctx) -> None:
        a = m.axis
        if f"__ext_{a.name}" in ctx.axes:
            return
        ext = self.ex(a.extent, ctx)
        if not isinstance(a.extent, (Const, Dim)):
            v = self.fresh(f"ext_{a.name}_")
            self.w(f"{v} = {ext}")
            ext = v
        ctx.axes[f"__ext_{a.name}"] = ext
        st = self.ex(a.start, ctx)
        if not isinstance(a.start, (Const, Dim)):
            v = self.fresh(f"start_{a.name}_")
            self.w(f"{v} = {st}")
            st = v
        ctx.axes[f"__start_{a.name}"] = st

    def axis_value(self, m: AxisMap, ctx: Ctx, var: dict[str, str] | None = None) -> None:
        """Bind axis `m.axis` in ctx: its value (start + local) and mask (local < extent)."""
        a = m.axis
        var = var or self.var
        self.axis_bounds(m, ctx)
        ext, st = ctx.axes[f"__ext_{a.name}"], ctx.axes[f"__start_{a.name}"]
        if m.fused:
            f, which = m.fused
            # f = outer * extent(inner) + inner
            inner = self.k.root.axis(self._loop(f).origin[1])
            ie = self.ex(inner.extent, ctx)
            local = f"({var[f]} // ({ie}))" if which == 0 else f"({var[f]} % ({ie}))"
        else:
            parts = [var[ln] if s == 1 else f"{var[ln]} * {s}" for ln, s in
                     zip(m.loops, m.strides)]
            local = " + ".join(parts)
        v = self.fresh(f"{a.name}_")
        self.w(f"{v}_l = {local}")
        self.w(f"{v} = {v}_l" if st == "0" else f"{v} = {st} + {v}_l")
        ctx.axes[a.name] = v
        # lanes where an axis this one's bounds follow is out of range (past a segment's
        # end) are out of range here too: their bounds would reach past the buffer
        deps = sorted({n.axis.name for e in (a.start, a.extent) for n in walk(e)
                       if isinstance(n, AxisRef)})
        outer = mask_of(Ctx(ctx.axes, ctx.masks), deps)
        if m.masked:
            self.w(f"{v}_m = {v}_l < {ext}" if outer is None else
                   f"{v}_m = ({v}_l < {ext}) & {outer}")
            ctx.masks[a.name] = f"{v}_m"
            if a.max_extent is not None and any(isinstance(n, AxisRef) for n in walk(a.extent)):
                # A bound that varies with another block axis (a triangle) makes a 2-d mask;
                # loads that span only this axis use the looser in-bounds mask.
                self.w(f"{v}_b = {v}_l < {self.ex(a.max_extent, ctx)}")
                ctx.masks["__loose_" + a.name] = f"{v}_b"
        else:
            ctx.masks[a.name] = None

    def _loop(self, name: str) -> PLoop:
        return next(lp for lp in self.k.loops if lp.name == name)

    # -- steps ---------------------------------------------------------------------------
    def step(self, st: Step, pctx: Ctx) -> None:
        ctx = Ctx(locals=pctx.locals)
        for m in st.spatial:
            self.axis_value(m, ctx)
        self.w(f"# stage {st.stage.name} ({st.strategy})")
        for r in reduces_in(st.body):
            if st.strategy == "dot" and r is st.body:
                ctx.reduces[r] = self.dot(st, r, ctx)
            elif st.strategy == "scan":
                ctx.reduces[r] = self.scan(st, r, ctx)
            elif st.strategy == "online" and r is st.body:
                m, s = self.online(st, r, ctx)
                pctx.locals[st.online_max] = m
                ctx.reduces[r] = s
            else:
                ctx.reduces[r] = self.reduce(st, r, ctx)
        val = self.ex(st.body, ctx)
        if st.is_root:
            self.store(st, val, ctx)
        else:
            v = f"val_{st.stage.name}"
            self.w(f"{v} = {val}")
            pctx.locals[st.stage.name] = v
            if st.store_out:  # an output computed here: stored as well as kept
                self.store(st, v, ctx)

    def spatial_shape(self, st: Step) -> list[int]:
        shape = [1] * self.k.rank
        for m in st.spatial:
            for ln in m.loops:
                lp = self._loop(ln)
                if lp.role == "block":
                    shape[lp.pos] = lp.size
        return shape

    def red_loops(self, st: Step, r: Reduce, ctx: Ctx, lang_var: dict[str, str]):
        """Open the seq loops of reduce axes of `r`; bind block aranges. Returns depth."""
        depth = 0
        for m in st.reduce:
            if m.axis not in r.axes:
                continue
            for ln in m.loops:
                lp = next(x for x in st.reduce_loops if x.name == ln)
                if lp.role == "seq":
                    self.axis_bounds(m, ctx)
                    s = m.strides[m.loops.index(ln)]
                    v = self.fresh(f"s_{ln}_")
                    self.w(f"for {v} in range(0, ({ctx.axes['__ext_' + m.axis.name]} + "
                           f"{s - 1}) // {s}):")
                    self.ind += 1
                    depth += 1
                    lang_var[ln] = v
        return depth

    def reduce_axes_values(self, st: Step, r: Reduce, ctx: Ctx, var: dict[str, str],
                           orient: dict[str, str] | None = None) -> None:
        for m in st.reduce:
            if m.axis not in r.axes:
                continue
            for ln in m.loops:
                lp = next(x for x in st.reduce_loops if x.name == ln)
                if lp.role == "block":
                    idx = orient[ln] if orient else self.shape_idx(lp.pos)
                    v = self.fresh(f"r_{ln}_")
                    self.w(f"{v} = tl.arange(0, {lp.size}){idx}")
                    var[ln] = v
            self.axis_value(m, ctx, var)

    def _reduce_input(self, st: Step, r: Reduce, ctx: Ctx, expr: Expr, fill: str,
                      base: str, tl_type: str = "tl.float32") -> tuple[str, Ctx, int]:
        """Open r's loops and evaluate `expr` over its tile in `tl_type`, `fill` where
        masked. Returns the value's name, the context inside the loops and their depth."""
        rctx = ctx.child()
        var = dict(self.var)
        depth = self.red_loops(st, r, rctx, var)
        self.reduce_axes_values(st, r, rctx, var)
        v = self.fresh(base)
        self.w(f"{v} = ({self.ex(expr, rctx)}).to({tl_type})")
        mask = mask_of(rctx, [a.name for a in r.axes])
        if mask:
            self.w(f"{v} = tl.where({mask}, {v}, {fill})")
        return v, rctx, depth

    def _block_positions(self, st: Step, r: Reduce) -> list[int]:
        """The tile positions of r's reduce blocks, in loop order."""
        return [lp.pos for m in st.reduce if m.axis in r.axes for ln in m.loops
                for lp in st.reduce_loops if lp.name == ln and lp.role == "block"]

    def reduce(self, st: Step, r: Reduce, ctx: Ctx) -> str:
        acc = self.fresh("acc")
        shape = self.spatial_shape(st)
        tl_type, ident, zero = acc_type(r)
        self.w(f"{acc} = tl.full({shape}, {ident}, {tl_type})")
        v, rctx, depth = self._reduce_input(st, r, ctx, r.body, ident, "v", tl_type)
        red = v
        for pos in self._block_positions(st, r):
            red = (f"tl.reduce({red}, {pos}, _kv_mul, keep_dims=True)" if r.op == "prod"
                   else f"tl.{r.op}({red}, axis={pos}, keep_dims=True)")
        self.w(f"{acc} = {COMBINE[r.op].format(a=acc, b=red)}")
        self.ind -= depth
        if r.op not in ("sum", "prod") and any(not isinstance(a.extent, (Const, Dim))
                                               for a in r.axes):
            ext = " * ".join(f"({rctx.axes['__ext_' + a.name]})" for a in r.axes)
            self.w(f"{acc} = tl.where({ext} > 0, {acc}, {zero})")
        return acc

    def scan_pos(self, st: Step) -> int:
        return next(self._loop(ln).pos for ln in scan_map(st).loops
                    if self._loop(ln).role == "block")

    def carry(self, st: Step) -> None:
        """The running value of a scan: the step's tile with the scan position reduced."""
        r = reduces_in(st.body)[0]
        shape = self.spatial_shape(st)
        shape[self.scan_pos(st)] = 1
        c = self.fresh("carry")
        tl_type, ident, _ = acc_type(r)
        self.w(f"{c} = tl.full({shape}, {ident}, {tl_type})")
        self.carries[st.stage.name] = c

    def scan(self, st: Step, r: Reduce, ctx: Ctx) -> str:
        """A prefix reduction over the scan axis' block: the body at k = j, scanned along
        the block (tl.cumsum / tl.associative_scan, reversed for a reverse scan) and
        combined with the value carried from the chunks before; the carry then takes the
        chunk's total. Masked lanes hold the identity, so they change nothing."""
        if st.stage.name not in self.carries:
            self.carry(st)
        c = self.carries[st.stage.name]
        pos = self.scan_pos(st)
        pre = st.scan
        j, k = pre.axis, r.axes[0].name
        rctx = ctx.child()
        rctx.axes[k] = ctx.axes[j]
        mask = ctx.masks.get(j)
        nonempty = None
        if pre.shift:  # exclusive: the element joining at j is k = j + shift, if any
            kv, nonempty = self.fresh("k"), self.fresh("ne")
            self.w(f"{kv} = {ctx.axes[j]} + ({pre.shift})")
            self.w(f"{nonempty} = {self.ex(pre.nonempty, ctx)}")
            rctx.axes[k] = kv
            mask = f"({mask}) & ({nonempty})" if mask else nonempty
        rctx.masks[k] = mask
        v = self.fresh("v")
        tl_type, ident, zero = acc_type(r)
        self.w(f"{v} = ({self.ex(r.body, rctx)}).to({tl_type})")
        if mask:
            self.w(f"{v} = tl.where({mask}, {v}, {ident})")
        rev = ", reverse=True" if pre.reverse else ""
        scanned = (f"tl.cumsum({v}, axis={pos}{rev})" if r.op == "sum" else
                   f"tl.associative_scan({v}, {pos}, _kv_{'mul' if r.op == 'prod' else r.op}"
                   f"{rev})")
        total = (f"tl.reduce({v}, {pos}, _kv_mul, keep_dims=True)" if r.op == "prod"
                 else f"tl.{r.op}({v}, axis={pos}, keep_dims=True)")
        acc = self.fresh("acc")
        self.w(f"{acc} = {COMBINE[r.op].format(a=c, b=scanned)}")
        self.w(f"{c} = {COMBINE[r.op].format(a=c, b=total)}")
        if nonempty and r.op in ("max", "min"):  # an empty window's max is 0
            self.w(f"{acc} = tl.where({nonempty}, {acc}, {zero})")
        return acc

    def online(self, st: Step, r: Reduce, ctx: Ctx) -> tuple[str, str]:
        """One pass: running max m and rescaled running sum s (softmax normalizer)."""
        x_expr = r.body.x.a  # exp(x - m)
        shape = self.spatial_shape(st)
        m, s = self.fresh("m"), self.fresh("s")
        self.w(f"{m} = tl.full({shape}, float('-inf'), tl.float32)")
        self.w(f"{s} = tl.zeros({shape}, tl.float32)")
        x, _, depth = self._reduce_input(st, r, ctx, x_expr, "float('-inf')", "x")
        tmax = x
        tsum_axes = self._block_positions(st, r)
        for pos in tsum_axes:
            tmax = f"tl.max({tmax}, axis={pos}, keep_dims=True)"
        mn, safe = self.fresh("mn"), self.fresh("ms")
        self.w(f"{mn} = tl.maximum({m}, {tmax})")
        self.w(f"{safe} = tl.where({mn} == float('-inf'), 0.0, {mn})")
        p = f"tl.exp({x} - {safe})"
        for pos in tsum_axes:
            p = f"tl.sum({p}, axis={pos}, keep_dims=True)"
        self.w(f"{s} = {s} * tl.exp({m} - {safe}) + {p}")
        self.w(f"{m} = {mn}")
        self.ind -= depth
        self.w(f"{m} = tl.where({m} == float('-inf'), 0.0, {m})")
        return m, s

    def dot(self, st: Step, r: Reduce, ctx: Ctx) -> str:
        """sum_k A*B with A on block position 0 and B on position 1 -> tl.dot. In a rank-3
        tile position 0 is a batch both operands span, A is on 1 and B on 2: a batched
        tl.dot of [batch, M, K] by [batch, K, N]."""
        shape = self.spatial_shape(st)
        acc = self.fresh("acc")
        self.w(f"{acc} = tl.zeros({shape}, tl.float32)")
        a, b = product_factors(r)
        rows, cols = self.k.rank - 2, self.k.rank - 1
        if self._pos_of(st, a) == cols:
            a, b = b, a
        rctx = ctx.child()
        var = dict(self.var)
        depth = self.red_loops(st, r, rctx, var)
        kl = next(x for x in st.reduce_loops if x.role == "block")
        for name in [n for n in rctx.masks if n.startswith("__loose_")]:
            rctx.masks[name[len("__loose_"):]] = rctx.masks[name]
        ta = self._operand(st, r, a, rctx, var, kl, k_rows=False, pos=rows)
        if self._gram(st, a, b):  # B is A's own tile, transposed: load it once
            tb = self.fresh("b")
            self.w(f"{tb} = {self._trans(ta)}")
        else:
            tb = self._operand(st, r, b, rctx, var, kl, k_rows=True, pos=cols)
        f32 = a.buffer.dtype == dt.f32 or b.buffer.dtype == dt.f32
        prec = f', input_precision="{self.k.dot_precision or "ieee"}"' if f32 else ""
        if a.buffer.dtype != b.buffer.dtype or self.dot_f32:
            self.w(f"{ta} = {ta}.to(tl.float32)")
            self.w(f"{tb} = {tb}.to(tl.float32)")
            prec = ', input_precision="ieee"'
        self.w(f"{acc} = tl.dot({ta}, {tb}, {acc}{prec})")
        self.ind -= depth
        return acc

    def _operand(self, st: Step, r: Reduce, ld: Load, rctx: Ctx, var: dict, kl: PLoop,
                 k_rows: bool, pos: int) -> str:
        """Load one dot operand as a tile: [M, K] or [K, N], after a leading batch
        dimension in a rank-3 tile. The tile is read in the orientation in which memory is
        contiguous along its last dimension (coalesced), and transposed in registers when
        the dot wants the other one: X[b, j, d] for B = X^T loads [j, d], then trans."""
        last = set(axes_in(ld.index[-1])) if ld.index else set()
        k_fast = any(m.axis.name in last for m in st.reduce if m.axis in r.axes)
        transpose = k_fast if k_rows else (not k_fast and bool(last))
        if bulk.wants_bulk(st, ld.buffer.name):
            t = self._bulk_operand(st, ld, var, "b" if k_rows else "a")
            if t is not None:
                if transpose:
                    self.w(f"{t} = {self._trans(t)}")
                return t
        rows_k = k_rows != transpose
        rank = self.k.rank
        rows, cols = self.shape_idx(rank - 2), self.shape_idx(rank - 1)
        c = rctx.child()
        v = dict(var)
        if transpose:  # the spatial axis takes the other orientation
            for m in st.spatial:
                blk = next((self._loop(ln) for ln in m.loops
                            if self._loop(ln).role == "block"), None)
                if blk is not None and blk.pos == pos:
                    name = self.fresh(f"t_{blk.name}_")
                    self.w(f"{name} = tl.arange(0, {blk.size}){cols if rows_k else rows}")
                    v[blk.name] = name
                    self.axis_value(m, c, v)
            for key in [n for n in c.masks if n.startswith("__loose_")]:
                c.masks[key[len("__loose_"):]] = c.masks[key]
        self.reduce_axes_values(st, r, c, dict(v), {kl.name: rows if rows_k else cols})
        t = self.fresh("b" if k_rows else "a")
        self.w(f"{t} = {self.ex(ld, c, RAW)}")
        if transpose:
            self.w(f"{t} = {self._trans(t)}")
        return t

    def _bulk_operand(self, st: Step, ld: Load, var: dict, base: str) -> str | None:
        """The operand's tile through a tensor descriptor (bulk.py), in memory order; None
        (pointer tiles, with a comment) where the shape class rules the descriptor out."""
        why = bulk.misaligned(self.plan, ld.buffer)
        if why is not None:
            self.w(f"# cache {ld.buffer.name} (shared, bulk): {why}; the threads copy it")
            return None
        bt = bulk.tile(self.k, st, ld)  # the backend's check has ruled out BulkError
        at = bulk.origin(self.k, st, bt, var)
        self._descriptor(bt, ld.buffer)
        t = self.fresh(base)
        self.w(f"{t} = {bt.arg}.load([{at[0]}, {at[1]}])")
        return t

    def _descriptor(self, bt: bulk.BulkTile, b) -> None:
        """A kernel parameter for the descriptor of `bt`, and the launcher's guard on it."""
        if bt.arg in self.descriptors:
            return
        self.descriptors[bt.arg] = bt
        rows, cols = (self.ex(e, Ctx()) for e in b.shape)
        self.bulk_guards.append(
            (f"(({cols}) * {b.dtype.bits // 8}) % {bulk.MIN_ROW_BYTES} == 0 and "
             f"({rows}) > 0 and ({cols}) > 0",
             f"{b.name}: its bulk copy needs non-empty rows of a multiple of "
             f"{bulk.MIN_ROW_BYTES} bytes"))

    def _bulk_store(self, st: Step, val: str) -> bool:
        """Write the output tile through a tensor descriptor, in `store_parts` pieces along
        its last axis (bulk.py); False (a comment, then pointer stores) where the shape
        class rules the descriptor out."""
        out = st.stage.out
        why = bulk.misaligned(self.plan, out)
        if why is not None:
            self.w(f"# cache {out.name} (shared, bulk): {why}; the threads write it")
            return False
        bt = bulk.output_tile(self.k, st)  # the backend's check has ruled out BulkError
        at = bulk.origin(self.k, st, bt, self.var)
        self._descriptor(bt, out)
        v = self.fresh(f"v_{out.name}_")
        self.w(f"{v} = ({val}).to({TL[out.dtype.name]})")
        rows, width = bt.block
        for q, piece in enumerate(self._pieces(v, rows, width, st.store_parts)):
            col = at[1] if q == 0 else f"{at[1]} + {q * width}"
            self.w(f"{bt.arg}.store([{at[0]}, {col}], {piece})")
        return True

    def _pieces(self, v: str, rows: int, width: int, parts: int) -> list[str]:
        """[rows, parts * width] tile `v` as `parts` [rows, width] tiles, left to right:
        Triton has no slices, so reshape to [rows, parts, width], move the part index
        last and split it in halves (a split takes a last dimension of 2)."""
        if parts == 1:
            return [v]
        t = self.fresh(f"{v}_p")
        self.w(f"{t} = tl.permute(tl.reshape({v}, [{rows}, {parts}, {width}]), (0, 2, 1))")
        return self._halves(t, rows, width, parts)

    def _halves(self, t: str, rows: int, width: int, parts: int) -> list[str]:
        """The pieces of [rows, width, parts] tile `t` in part order: part q = 2 q' + r
        lands in half r at q'."""
        lo, hi = self.fresh(f"{t}_"), self.fresh(f"{t}_")
        src = t if parts == 2 else f"tl.reshape({t}, [{rows}, {width}, {parts // 2}, 2])"
        self.w(f"{lo}, {hi} = tl.split({src})")
        if parts == 2:
            return [lo, hi]
        evens = self._halves(lo, rows, width, parts // 2)
        odds = self._halves(hi, rows, width, parts // 2)
        return [x for pair in zip(evens, odds) for x in pair]

    def _trans(self, tile: str) -> str:
        """A dot operand tile with its last two dimensions swapped (a batch stays first)."""
        return f"tl.trans({tile}{'' if self.k.rank == 2 else ', (0, 2, 1)'})"

    def _gram(self, st: Step, a: Load, b: Load) -> bool:
        """sum_k X[.., i, k] * X[.., j, k] (a Gram matrix, DLRM's interaction): when i and
        j are whole tiles of one size from 0 over the same bound, B's tile (masked by j's
        bound) holds exactly the values of A's tile (masked by i's extent)."""
        if a.buffer != b.buffer:
            return False
        own = {}
        for ld, pos in ((a, self.k.rank - 2), (b, self.k.rank - 1)):
            names = set(axes_in(ld))
            m = next((m for m in st.spatial if m.axis.name in names and any(
                self._loop(ln).role == "block" and self._loop(ln).pos == pos
                for ln in m.loops)), None)
            if m is None or len(m.loops) != 1 or m.axis.start != Const(0):
                return False
            own[pos] = (m.axis, self._loop(m.loops[0]).size)
        (ai, si), (aj, sj) = own[self.k.rank - 2], own[self.k.rank - 1]
        if si != sj or ai.is_jagged or ai.extent != aj.bound:
            return False
        return substitute_axes(b, {aj.name: AxisRef(ai)}) == a

    def _pos_of(self, st: Step, ld: Load) -> int | None:
        """The block position a dot operand spans besides the batch (rank 3: position 0)."""
        names = set(axes_in(ld))
        for m in st.spatial:
            if m.axis.name in names:
                for ln in m.loops:
                    lp = self._loop(ln)
                    if lp.role == "block" and lp.pos >= self.k.rank - 2:
                        return lp.pos
        return None

    def store(self, st: Step, val: str, ctx: Ctx) -> None:
        out = st.stage.out
        if bulk.writes_in_bulk(st) and self._bulk_store(st, val):
            return
        off = linear_offset(st.stage.store_index, out.shape, lambda e: self.ex(e, ctx))
        if self.k.rank and not any(self._loop(ln).role == "block" for mm in st.spatial
                                   for ln in mm.loops):
            # every output axis is on the grid but a reduction made the value a [1, ...]
            # block: store through a matching block of one pointer
            off = f"({off}) + tl.zeros({[1] * self.k.rank}, tl.int64)"
        mask = mask_of(ctx, [m.axis.name for m in st.spatial])
        m = f", mask={mask}" if mask else ""
        if isinstance(st.body, Const):  # a constant (a zeroing kernel's): a tile of it
            val = f"tl.full({list(self.k.pos_sizes)}, {val}, {TL[out.dtype.name]})"
        if st.stage.accumulate == "sum":
            # points of other programs (and of this tile) may add into the same element
            self.w(f"tl.atomic_add({ptr(out.name)} + {off}, ({val}).to("
                   f"{TL[out.dtype.name]}){m}, sem='relaxed')")
            return
        self.w(f"tl.store({ptr(out.name)} + {off}, ({val}).to({TL[out.dtype.name]}){m})")


def render_module(plan: Plan, dot_f32: bool = False, libdevice: bool = True) -> dict:
    """The pieces the module template needs: kernels, launcher lines, guards, scratch.
    `dot_f32` upcasts tl.dot operands (Triton 3.6's interpreter gets bf16 dots wrong);
    `libdevice` spells the GELU helpers' reciprocal and exp2 with libdevice (GPU only,
    gelu.py)."""
    op = plan.op
    dims = op_dims(op)
    bufs = buffers(op, plan)
    kernels = []
    ctx = Ctx()
    wide = wide_offsets(op, plan)
    bulk_guards: list[tuple[str, str]] = []
    descriptors = False
    for k in plan.kernels:
        writer = KernelWriter(plan, k, dot_f32, wide)
        body = writer.render()
        descs = writer.descriptors
        descriptors = descriptors or bool(descs)
        bulk_guards += [g for g in writer.bulk_guards if g not in bulk_guards]
        total = " * ".join(f"({emit(grid_count(k, lp), ctx, HOST, ptr)})" for lp in k.grid) \
            or "1"
        # A constexpr dim is compiled in: index arithmetic folds and trip counts are known;
        # Triton's JIT compiles one kernel per value, so other shapes stay correct.
        args = [ptr(b) for b in bufs] + [f"d_{d}: tl.constexpr" if d in k.constexpr_dims
                                         else f"d_{d}" for d in dims] + list(descs)
        kernels.append({"name": k.name, "args": ", ".join(args), "body": body,
                        "grid": total, "persistent": k.persistent if k.grid else None,
                        "num_warps": k.num_warps or 4,
                        "num_stages": k.num_stages or (3 if k.steps[-1].strategy == "dot"
                                                       or any(s.strategy == "dot"
                                                              for s in k.steps) else 1),
                        "call": ", ".join([f'bufs["{b}"]' for b in bufs] +
                                          [f"d_{d}" for d in dims] +
                                          [f'TensorDescriptor.from_tensor(bufs["{t.buffer}"], '
                                           f'[{t.block[0]}, {t.block[1]}])'
                                           for t in descs.values()])})
    guards = []
    for k in plan.kernels:
        for cond, msg in k.guards:
            guards.append({"cond": emit(cond, ctx, HOST, ptr), "msg": msg})
    guards += [{"cond": cond, "msg": msg} for cond, msg in bulk_guards]
    if not wide:
        for name, shape in _buffer_shapes(op, plan).items():
            n = " * ".join(f"({emit(e, ctx, HOST, ptr)})" for e in shape) or "1"
            guards.append({"cond": f"{n} < {NARROW_LIMIT}",
                           "msg": f"{name}: under {NARROW_LIMIT} elements (32-bit offsets)"})
    scratch = []
    for name in plan.scratch:
        b = op.stage(name).out
        shape = ", ".join(emit(s, ctx, HOST, ptr) for s in b.shape)
        scratch.append({"name": name, "shape": f"({shape},)" if shape else "()",
                        "dtype": TORCH[b.dtype.name]})
    half = all(op.stage(n).out.dtype in (dt.bf16, dt.f16) for n in op.outputs)
    return {"kernels": kernels, "dims": dims, "guards": guards, "scratch": scratch,
            **gelu.helpers([k["body"] for k in kernels], libdevice, half),
            "descriptors": descriptors,
            "mul": any("_kv_mul" in k["body"] for k in kernels),  # a product reduction
            "kv_max": any("_kv_max" in k["body"] for k in kernels),  # running max, min
            "kv_min": any("_kv_min" in k["body"] for k in kernels)}

