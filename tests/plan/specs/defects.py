"""Operators that once broke default schedules or code generation (tests/plan/
test_lowering_defects.py runs each): a full reduction to a 0-d output, pooling windows,
a power, a -inf constant, a matrix-vector product, a contraction under an epilogue, a
bf16 contraction stored as bf16, a normalization over a middle axis, a jagged sum."""

from kevolve.ir.builder import (
    abs_,
    axes,
    axis,
    bf16,
    cast,
    compute,
    const,
    dims,
    f32,
    i64,
    input,
    jagged_axis,
    max_,
    maximum,
    op,
    param,
    reduce_axis,
    sum_,
    where,
)

N = dims("N")
x = input("x", (N,), f32)
k = reduce_axis("k", N)
full_sum = op("full_sum", inputs=[x], outputs=[compute("total", (), sum_(x[k], over=k))])

B, C, Lin = dims("B C Lin")
xp = input("x", (B, C, Lin), f32)
b, c, l_ = axes("b c l", B, C, Lin // 4)
w = reduce_axis("w", 4)
avg_pool = op("avg_pool", inputs=[xp], outputs=[
    compute("y", (b, c, l_), sum_(xp[b, c, l_ * 4 + w], over=w) / 4.0)])

Hin, Win = dims("Hin Win")
x2 = input("x", (B, C, Hin, Win), f32)
b2, c2, h2, w2 = axes("b c h w", B, C, Hin // 2, Win // 2)
r, s = reduce_axis("r", 2), reduce_axis("s", 2)
max_pool = op("max_pool", inputs=[x2], outputs=[
    compute("y", (b2, c2, h2, w2), max_(x2[b2, c2, h2 * 2 + r, w2 * 2 + s], over=(r, s)))])

M, K = dims("M K")
xq = input("x", (M, K), f32)
iq, jq = axes("i j", M, K)
power = op("power", inputs=[xq], outputs=[
    compute("y", (iq, jq), (abs_(xq[iq, jq]) + 0.5) ** 1.5 + xq[iq, jq] ** 3)])

xr = input("x", (M, K), f32)
(ir_,) = axes("i", M)
kr = reduce_axis("k", K)
positive_max = op("positive_max", inputs=[xr], outputs=[compute("y", (ir_,), max_(
    where(xr[ir_, kr] > 0.0, xr[ir_, kr], const(float("-inf"), f32)), over=kr))])

A = input("A", (M, K), f32)
v = input("v", (K, 1), f32)
im, jm = axes("i j", M, 1)
km = reduce_axis("k", K)
matvec = op("matvec", inputs=[A, v], outputs=[
    compute("y", (im, jm), sum_(A[im, km] * v[km, jm], over=km))])

Nn = dims("Nn")
Ag = input("A", (M, K), bf16)
Wg = input("W", (K, Nn), bf16)
bias = input("bias", (Nn,), f32)
ig, jg = axes("i j", M, Nn)
kg = reduce_axis("k", K)
gemm_epilogue = op("gemm_epilogue", inputs=[Ag, Wg, bias], outputs=[compute("y", (ig, jg), cast(
    sum_(cast(Ag[ig, kg], f32) * cast(Wg[kg, jg], f32), over=kg) * 0.5 + bias[jg], bf16))])
gemm_bf16 = op("gemm_bf16", inputs=[Ag, Wg], outputs=[
    compute("y", (ig, jg), sum_(Ag[ig, kg] * Wg[kg, jg], over=kg))])

D0, D1, D2 = dims("D0 D1 D2")
x3 = input("x", (D0, D1, D2), f32)
a0, a1, a2 = axes("a0 a1 a2", D0, D1, D2)
rm = reduce_axis("r", D1)
stat = compute("stat", (a0, a2), max_(x3[a0, rm, a2], over=rm))
middle_norm = op("middle_norm", inputs=[x3], outputs=[
    compute("y", (a0, a1, a2), x3[a0, a1, a2] - stat[a0, a2])])

T, Bj, Dj = dims("T Bj Dj")
values = input("values", (T, Dj), f32)
offsets = input("offsets", (Bj + 1,), i64)
bj, dj = axes("b d", Bj, Dj)
lj = jagged_axis("l", start=offsets[bj], end=offsets[bj + 1], max_extent=param("max_len"),
                 reduce=True)
jagged_sum = op("jagged_sum", inputs=[values, offsets], outputs=[
    compute("out", (bj, dj), sum_(values[lj, dj], over=lj))])

# a contraction over a segment whose bounds follow an output axis (position-weighted
# pooling: sum over a jagged l of w[b, l - start] * values[l, d]): not a tiled matrix product
Tp, Bp, Pp, Dp = dims("Tp Bp Pp Dp")
pvalues = input("values", (Tp, Dp), f32)
poffsets = input("offsets", (Bp + 1,), i64)
pw = input("w", (Bp, Pp), f32)
bp, dp = axes("b d", Bp, Dp)
lp = jagged_axis("l", start=poffsets[bp], end=poffsets[bp + 1], max_extent=Pp, reduce=True)
weighted_pool = op("weighted_pool", inputs=[pvalues, poffsets, pw], outputs=[
    compute("pooled", (bp, dp), sum_(pw[bp, lp - poffsets[bp]] * pvalues[lp, dp], over=lp))])

# a segment's statistic over two reduce axes computed in the program of an output that
# tiles the segment's rows: the statistic's tile is its own, not the output's
Tc, Bc, Dc = dims("Tc Bc Dc")
cvalues = input("values", (Tc, Dc), f32)
coffsets = input("offsets", (Bc + 1,), i64)
bc_, dc = axes("b d", Bc, Dc)
ml = param("max_len")
lc = jagged_axis("l", start=coffsets[bc_], end=coffsets[bc_ + 1], max_extent=ml)
kc = jagged_axis("k", start=coffsets[bc_], end=coffsets[bc_ + 1], max_extent=ml, reduce=True)
ddc = reduce_axis("dd", Dc)
cmean = compute("mean", (bc_,), sum_(cvalues[kc, ddc], over=(kc, ddc))
                / cast(maximum((coffsets[bc_ + 1] - coffsets[bc_]) * Dc, 1), f32))
segment_center = op("segment_center", inputs=[cvalues, coffsets], outputs=[
    compute("out", (bc_, lc, dc), cvalues[lc, dc] - cmean[bc_], shape=(Tc, Dc),
            store=(lc, dc))])

# a reduce axis whose extent follows a jagged axis of the stage (a cumulative sum within
# each segment, written as a sum over its prefix)
Ts, Bs, Ds = dims("Ts Bs Ds")
svalues = input("values", (Ts, Ds), f32)
soffsets = input("offsets", (Bs + 1,), i64)
bs, ds = axes("b d", Bs, Ds)
ls = jagged_axis("l", start=soffsets[bs], end=soffsets[bs + 1], max_extent=param("max_len"))
kks = axis("kk", ls + 1 - soffsets[bs], start=soffsets[bs], max_extent=param("max_len"),
           reduce=True)
segment_prefix = op("segment_prefix", inputs=[svalues, soffsets], outputs=[
    compute("out", (bs, ls, ds), sum_(svalues[kks, ds], over=kks), shape=(Ts, Ds),
            store=(ls, ds))])

# a matrix product of a pointwise producer (relu(A) @ B, relu a stage of its own)
Mr, Kr, Nr = dims("Mr Kr Nr")
Ar, Br = input("A", (Mr, Kr), f32), input("B", (Kr, Nr), f32)
rr, cr = axes("r c", Mr, Kr)
relu_a = compute("ra", (rr, cr), maximum(Ar[rr, cr], 0.0))
ir2, jr2 = axes("i j", Mr, Nr)
kr2 = reduce_axis("k", Kr)
relu_mm = op("relu_mm", inputs=[Ar, Br], outputs=[
    compute("C", (ir2, jr2), sum_(relu_a[ir2, kr2] * Br[kr2, jr2], over=kr2))])

# a reduction whose window starts at an output axis and reads it (not a prefix scan):
# y[i, j] = sum over k in [j, N) of x[i, k] * (k - j)
Mw, Nw = dims("Mw Nw")
xw = input("x", (Mw, Nw), f32)
iw, jw = axes("i j", Mw, Nw)
kw_ = axis("k", Nw - jw, start=jw, max_extent=Nw, reduce=True)
suffix_weighted = op("suffix_weighted", inputs=[xw], outputs=[
    compute("y", (iw, jw), sum_(xw[iw, kw_] * cast(kw_ - jw, f32), over=kw_))])
