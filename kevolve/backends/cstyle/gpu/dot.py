"""The tiled contraction path of the GPU C-like emitter.

A kernel that is one `dot` step (sum_k A*B, A over block position 0, B over position 1),
alone or followed by a pointwise root over the same tile, becomes the classic tiled GEMM:

    for each k tile:  stage A[BM][BK] and B[BK][BN] in shared memory (any index
                      expressions: each element is the operand expression at (i, k) or
                      (k, j), zero outside the masks), barrier,
                      accumulate, barrier
    epilogue:         each accumulator element binds (i, j), evaluates the root's body
                      (the fused epilogue, e.g. bias + gelu) and stores it.

Accumulation is a per-thread register micro-tile (SIMT, any dtype) or, on CUDA with bf16
or f16 operands, WMMA 16x16x16 tensor-core fragments with f32 accumulators (the epilogue
then goes through a per-warp 16x16 shared scratch tile). Any other plan shape returns None
and takes the generic path."""

from __future__ import annotations

from dataclasses import replace

from ....ir import dtypes as dt
from ....ir.nodes import AxisRef, Binary, Cast, Load, Reduce, walk
from ....plan.model import Step
from ....plan.walk import reads_contiguous, reduces_in
from ...pyexpr import Ctx, emit
from ..stmts import Assign, Comment, Decl, For, If, Line, Range, Scope


class _Fallback(Exception):
    pass


def _operand(e):
    """A Load, possibly under a float Cast: (load, cast dtype or None)."""
    if isinstance(e, Cast) and e.dtype.is_float and isinstance(e.x, Load):
        return e.x
    if isinstance(e, Load):
        return e
    raise _Fallback("operand is not a load")


class DotBuilder:
    def __init__(self, b):
        self.b = b
        self.k = b.k

    @staticmethod
    def try_build(b):
        try:
            return DotBuilder(b).build()
        except _Fallback:
            b.shared.clear()
            return None

    # -- matching ------------------------------------------------------------------------
    def match(self) -> None:
        k, b = self.k, self.b
        if any(lp.role == "seq" for lp in k.loops):
            raise _Fallback("sequential kernel loops")
        blocks = sorted((lp.pos, lp.size) for lp in k.loops if lp.role == "block")
        if [p for p, _ in blocks] != [0, 1]:
            raise _Fallback("not a 2-d tile")
        dots = [st for st in k.steps if st.strategy == "dot"]
        if len(dots) != 1:
            raise _Fallback("no single dot step")
        dot = dots[0]
        root = k.steps[-1]
        if any(st.store_out for st in k.steps):
            raise _Fallback("an output computed beside the root")
        if dot.is_root:
            if len(k.steps) != 1:
                raise _Fallback("other steps beside the dot")
        elif k.steps != (dot, root) or reduces_in(root.body) or root.level is not None:
            raise _Fallback("epilogue is not one pointwise root")
        if dot.level is not None:
            raise _Fallback("dot inside a loop")
        for st in (dot, root):
            if sorted(b.positions(st)) != blocks:
                raise _Fallback("steps do not span the whole tile")
        r = dot.body
        if not (isinstance(r, Reduce) and r.op == "sum" and len(r.axes) == 1
                and isinstance(r.body, Binary) and r.body.op == "mul"):
            raise _Fallback("not sum(a * b)")
        red_blocks = [lp for lp in dot.reduce_loops if lp.role == "block"]
        if len(red_blocks) != 1 or len(dot.reduce) != 1:
            raise _Fallback("k is not one block (plus an optional loop)")
        self.dot, self.root, self.r = dot, root, r
        self.kmap = dot.reduce[0]
        self.kblock = red_blocks[0]
        self.BM, self.BN = blocks[0][1], blocks[1][1]
        self.BK = self.kblock.size
        la, lb = _operand(r.body.a), _operand(r.body.b)
        pa, pb = self.pos_of(dot, la), self.pos_of(dot, lb)
        if (pa, pb) == (1, 0):
            la, lb = lb, la
        elif (pa, pb) != (0, 1):
            raise _Fallback("operands do not split the tile positions")
        self.A, self.B = la, lb
        names = {n.axis.name for n in walk(la) if isinstance(n, AxisRef)} | \
            {n.axis.name for n in walk(lb) if isinstance(n, AxisRef)}
        if r.axes[0].name not in names:
            raise _Fallback("k does not index the operands")

    def pos_of(self, st: Step, ld: Load) -> int | None:
        names = {n.axis.name for n in walk(ld) if isinstance(n, AxisRef)}
        pos = {self.b.block_of(m).pos for m in st.spatial
               if m.axis.name in names and self.b.block_of(m) is not None}
        return pos.pop() if len(pos) == 1 else None

    # -- building ------------------------------------------------------------------------
    def build(self) -> list:
        self.match()
        b = self.b
        g = b.lang
        T = b.T
        nwarps = T // g.wavefront
        self.wmma = (g.wmma and self.A.buffer.dtype == self.B.buffer.dtype
                     and self.A.buffer.dtype in (dt.bf16, dt.f16)
                     and self.BM % 16 == 0 and self.BN % 16 == 0 and self.BK % 16 == 0)
        if self.wmma:
            wm, wn = _warp_grid(nwarps, self.BM, self.BN)
            if wm * wn == 0:
                self.wmma = False
        out: list = [Decl("tid", "i64", f"(int64_t){g.thread_idx}")]
        b.grid_ids(out)
        ctx = Ctx()
        for m in self.root.spatial:  # grid-only axis values
            if all(b.role.get(ln) == "grid" for ln in m.loops):
                b.value(m, ctx, out, None)
        BM, BN, BK = self.BM, self.BN, self.BK
        et = g.ptr_type(self.A.buffer.dtype) if self.wmma else "float"
        pad = 8 if self.wmma else 1
        lda, ldb = BK + pad, BN + pad
        b.shared_array("kv_As", et, BM * lda, 32)
        b.shared_array("kv_Bs", et, BK * ldb, 32)
        out.append(Comment(f"dot: {BM}x{BN} tile, k tile {BK}, {T} threads, "
                           f"{'WMMA tensor cores' if self.wmma else 'register micro-tiles'}"))
        if self.wmma:
            b.uses_wmma = True
            self.wm, self.wn = _warp_grid(nwarps, BM, BN)
            self.FM, self.FN = BM // self.wm // 16, BN // self.wn // 16
            out += [Line("using namespace nvcuda;"),
                    Line(f"wmma::fragment<wmma::accumulator, 16, 16, 16, float> "
                         f"kv_acc[{self.FM}][{self.FN}];"),
                    Line(f"for (int fm = 0; fm < {self.FM}; ++fm) for (int fn = 0; fn < "
                         f"{self.FN}; ++fn) wmma::fill_fragment(kv_acc[fm][fn], 0.0f);"),
                    Decl("warp", "i64", f"tid / {g.wavefront}"),
                    Decl("wr", "i64", f"warp / {self.wn}"),
                    Decl("wc", "i64", f"warp % {self.wn}")]
        else:
            per = max(1, BM * BN // T)
            TM, TN = 1, 1
            while TM * TN < per:
                if TN <= TM and TN * 2 <= BN:
                    TN *= 2
                else:
                    TM *= 2
            self.TM, self.TN = TM, TN
            self.NX, self.NY = BN // TN, BM // TM
            out += [Line(f"float kv_acc[{TM}][{TN}];"),
                    Line(f"for (int mi = 0; mi < {TM}; ++mi) for (int ni = 0; ni < {TN}; "
                         "++ni) kv_acc[mi][ni] = 0.0f;"),
                    Decl("tx", "i64", f"tid % {self.NX}"), Decl("ty", "i64", f"tid / {self.NX}")]
        # the k loop (a sequential loop over k tiles, or the single tile)
        b.bounds(self.kmap, ctx, out)
        body = out
        for ln in self.kmap.loops:
            lp = next(x for x in self.dot.reduce_loops if x.name == ln)
            b.role[ln] = lp.role
            if lp.role == "seq":
                s = self.kmap.strides[self.kmap.loops.index(ln)]
                v = b.fresh(f"s_{ln}_")
                inner: list = []
                body.append(For(v, f"(({ctx.axes['__ext_' + self.kmap.axis.name]}) + {s - 1})"
                                f" / {s}", inner, unroll=lp.unroll))
                b.var[ln] = v
                body = inner
        self.load_tile(body, ctx, self.A, 0, "kv_As", BM, BK, lda, et, a_side=True)
        self.load_tile(body, ctx, self.B, 1, "kv_Bs", BN, BK, ldb, et, a_side=False)
        body.append(Line(g.barrier))
        if self.wmma:
            self.mma(body, et, lda, ldb)
        else:
            self.fma(body, lda, ldb)
        body.append(Line(g.barrier))
        if self.wmma:
            self.epilogue_wmma(out, ctx)
        else:
            self.epilogue_simt(out, ctx)
        return out

    def load_tile(self, out: list, ctx: Ctx, ld: Load, pos: int, name: str, S: int, BK: int,
                  ldm: int, et: str, a_side: bool) -> None:
        """Stage one operand tile: A as [BM][BK], B as [BK][BN], zero outside the masks.
        The fast thread index runs along whichever of (spatial, k) is contiguous."""
        b = self.b
        kname = self.kmap.axis.name
        k_fast = reads_contiguous(ld, kname)
        n = S * BK
        e = b.fresh("e")
        body: list = []
        out.append(Range(e, "tid", str(n), str(b.T), body))
        sv, kv = b.fresh("ts"), b.fresh("tk")
        if k_fast:
            body += [Decl(sv, "i64", f"{e} / {BK}"), Decl(kv, "i64", f"{e} % {BK}")]
        else:
            body += [Decl(sv, "i64", f"{e} % {S}"), Decl(kv, "i64", f"{e} / {S}")]
        tctx = ctx.child()
        conds = []
        for m in self.dot.spatial:
            lp = b.block_of(m)
            if lp is None:
                if m.axis.name not in tctx.axes:
                    b.value(m, tctx, body, None)
                continue
            if lp.pos != pos:
                continue
            try:
                b.loose_bounds(m, tctx)
            except NotImplementedError as ex:
                raise _Fallback(str(ex)) from ex
            b.bounds(m, tctx, body)
            hi = b.block_bound(m, lp, tctx)
            if hi != str(lp.size):
                conds.append(f"{sv} < {hi}")
            b.value(m, tctx, body, sv)
        hi = b.block_bound(self.kmap, self.kblock, tctx)
        if hi != str(BK):
            conds.append(f"{kv} < {hi}")
        b.value(self.kmap, tctx, body, kv)
        idx = f"{sv} * {ldm} + {kv}" if a_side else f"{kv} * {ldm} + {sv}"
        if et == "float":
            val = f"(float)({b.ex(ld, tctx)})"
            zero = "0.0f"
        else:
            raw = replace(b.lang.expr, load=lambda p, off, mask, x: f"{p}[{off}]")
            val = emit(ld, tctx, raw, lambda nm: f"p_{nm}")
            zero = "kv_bf16(0.0f)" if self.A.buffer.dtype == dt.bf16 else "kv_f16(0.0f)"
        if conds:
            cond = " && ".join(conds)
            guarded: list = []
            body.append(If(cond, guarded))
            guarded.append(Assign(f"{name}[{idx}]", val))
            body.append(If(f"!({cond})", [Assign(f"{name}[{idx}]", zero)]))
        else:
            body.append(Assign(f"{name}[{idx}]", val))

    def fma(self, out: list, lda: int, ldb: int) -> None:
        TM, TN, NX, NY, BK = self.TM, self.TN, self.NX, self.NY, self.BK
        body: list = []
        out.append(If(f"tid < {NX * NY}", body))
        kk = self.b.fresh("kk")
        inner: list = []
        body.append(For(kk, str(BK), inner, unroll=min(BK, 8)))
        inner += [Line(f"float av[{TM}], bv[{TN}];"),
                  Line("#pragma unroll"),
                  Line(f"for (int mi = 0; mi < {TM}; ++mi) av[mi] = kv_As[(ty + mi * {NY}) * "
                       f"{lda} + {kk}];"),
                  Line("#pragma unroll"),
                  Line(f"for (int ni = 0; ni < {TN}; ++ni) bv[ni] = kv_Bs[{kk} * {ldb} + tx + "
                       f"ni * {NX}];"),
                  Line("#pragma unroll"),
                  Line(f"for (int mi = 0; mi < {TM}; ++mi)"),
                  Line("#pragma unroll"),
                  Line(f"for (int ni = 0; ni < {TN}; ++ni) kv_acc[mi][ni] += av[mi] * bv[ni];")]

    def mma(self, out: list, et: str, lda: int, ldb: int) -> None:
        FM, FN, BK = self.FM, self.FN, self.BK
        body: list = []
        out.append(If(f"warp < {self.wm * self.wn}", body))
        body += [Line("#pragma unroll"),
                 Line(f"for (int kk = 0; kk < {BK}; kk += 16) {{"),
                 Line(f"    wmma::fragment<wmma::matrix_a, 16, 16, 16, {et}, wmma::row_major> "
                      f"fa[{FM}];"),
                 Line(f"    wmma::fragment<wmma::matrix_b, 16, 16, 16, {et}, wmma::row_major> "
                      f"fb[{FN}];"),
                 Line("    #pragma unroll"),
                 Line(f"    for (int fm = 0; fm < {FM}; ++fm) wmma::load_matrix_sync(fa[fm], "
                      f"kv_As + ((wr * {FM} + fm) * 16) * {lda} + kk, {lda});"),
                 Line("    #pragma unroll"),
                 Line(f"    for (int fn = 0; fn < {FN}; ++fn) wmma::load_matrix_sync(fb[fn], "
                      f"kv_Bs + kk * {ldb} + (wc * {FN} + fn) * 16, {ldb});"),
                 Line("    #pragma unroll"),
                 Line(f"    for (int fm = 0; fm < {FM}; ++fm)"),
                 Line("    #pragma unroll"),
                 Line(f"    for (int fn = 0; fn < {FN}; ++fn) wmma::mma_sync(kv_acc[fm][fn], "
                      "fa[fm], fb[fn], kv_acc[fm][fn]);"),
                 Line("}")]

    # -- epilogues -----------------------------------------------------------------------
    def emit_point(self, body: list, ctx: Ctx, acc: str) -> None:
        """b0, b1 are declared: bind (i, j), evaluate the root at the accumulator, store."""
        b = self.b
        pctx = ctx.child()
        inner = b.bind_point(self.root, pctx, body)
        if self.dot.is_root:
            pctx.reduces[self.r] = acc
        else:
            pctx.locals[self.dot.stage.name] = acc
        b.store(self.root, b.ex(self.root.body, pctx), pctx, inner)

    def epilogue_simt(self, out: list, ctx: Ctx) -> None:
        TM, TN, NX, NY = self.TM, self.TN, self.NX, self.NY
        body: list = []
        out.append(If(f"tid < {NX * NY}", body))
        mi_body: list = []
        body.append(For("mi", str(TM), mi_body, unroll="full"))
        ni_body: list = []
        mi_body.append(For("ni", str(TN), ni_body, unroll="full"))
        ni_body += [Decl("b0", "i64", f"ty + mi * {NY}"), Decl("b1", "i64", f"tx + ni * {NX}")]
        self.emit_point(ni_body, ctx, "kv_acc[mi][ni]")

    def epilogue_wmma(self, out: list, ctx: Ctx) -> None:
        b, g = self.b, self.b.lang
        W = g.wavefront
        nw = b.T // W
        b.shared_array("kv_Cs", "float", nw * 256, 32)
        body: list = []
        out.append(If(f"warp < {self.wm * self.wn}", body))
        body.append(Decl("lane", "i64", f"tid % {W}"))
        fm_body: list = []
        body.append(For("fm", str(self.FM), fm_body, unroll="full"))
        fn_body: list = []
        fm_body.append(For("fn", str(self.FN), fn_body, unroll="full"))
        fn_body += [Line("wmma::store_matrix_sync(kv_Cs + warp * 256, kv_acc[fm][fn], 16, "
                         "wmma::mem_row_major);"),
                    Line(g.warp_barrier)]
        e_body: list = []
        fn_body.append(Range("e", "lane", "256", str(W), e_body))
        e_body += [Decl("b0", "i64", f"(wr * {self.FM} + fm) * 16 + e / 16"),
                   Decl("b1", "i64", f"(wc * {self.FN} + fn) * 16 + e % 16")]
        self.emit_point(e_body, ctx, "kv_Cs[warp * 256 + e]")
        fn_body.append(Line(g.warp_barrier))


def _warp_grid(nwarps: int, BM: int, BN: int) -> tuple[int, int]:
    """Warps as wm x wn over the tile, each warp's part at least 16x16 (fewer warps take
    part when the tile is small)."""
    wm = wn = 1
    while wm * wn < nwarps:
        if BM // (wm * 2) >= 16 and (BM // wm >= BN // wn or BN // (wn * 2) < 16):
            wm *= 2
        elif BN // (wn * 2) >= 16:
            wn *= 2
        else:
            break
    return wm, wn


__all__ = ["DotBuilder", "Scope"]
