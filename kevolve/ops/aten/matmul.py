"""The matmul family: mm, bmm, addmm, baddbmm, matmul with broadcast, linear, mv, dot, outer,
einsum forms, products with diagonal and triangular matrices, multi_dot, kron, cdist, trace,
tensordot, bilinear. Every contraction is `sum_(a * b, over=k)` (a backend lowers it to its
matrix unit where it can); structure (a diagonal, a triangle) is written as structure, not as
a dense operand."""

from __future__ import annotations

from ...ir.builder import (
    axes,
    axis,
    compute,
    dims,
    f32,
    input,
    minimum,
    op,
    reduce_axis,
    sqrt,
    sum_,
)
from ._entry import at_least, entry


def _t(*names_shapes):
    return [input(n, s, f32) for n, s in names_shapes]


def _ops():
    M, N, K, Bt = dims("M N K Bt")
    i, j = axes("i j", M, N)
    k = reduce_axis("k", K)
    (b,) = axes("b", Bt)
    out = []

    A, B = _t(("A", (M, K)), ("B", (K, N)))
    out.append((op("mm", inputs=[A, B], outputs=[compute("y", (i, j), sum_(A[i, k] * B[k, j],
                                                                            over=k))]),
                "torch.mm"))
    A3, B3 = _t(("A", (Bt, M, K)), ("B", (Bt, K, N)))
    out.append((op("bmm", inputs=[A3, B3], outputs=[compute(
        "y", (b, i, j), sum_(A3[b, i, k] * B3[b, k, j], over=k))]), "torch.bmm"))
    (bias,) = _t(("bias", (N,)))
    out.append((op("addmm", inputs=[bias, A, B], outputs=[compute(
        "y", (i, j), bias[j] + sum_(A[i, k] * B[k, j], over=k))]), "torch.addmm"))
    out.append((op("addmm_scaled", inputs=[bias, A, B], outputs=[compute(
        "y", (i, j), 0.5 * bias[j] + 2.0 * sum_(A[i, k] * B[k, j], over=k))]),
        "torch.addmm(beta=0.5, alpha=2.0)"))
    (C3,) = _t(("C", (Bt, M, N)))
    out.append((op("baddbmm", inputs=[C3, A3, B3], outputs=[compute(
        "y", (b, i, j), C3[b, i, j] + sum_(A3[b, i, k] * B3[b, k, j], over=k))]),
        "torch.baddbmm"))
    out.append((op("matmul_broadcast", inputs=[A3, B], outputs=[compute(
        "y", (b, i, j), sum_(A3[b, i, k] * B[k, j], over=k))]), "torch.matmul"))
    x, W, bb = _t(("x", (M, K)), ("weight", (N, K)), ("bias", (N,)))
    out.append((op("linear", inputs=[x, W, bb], outputs=[compute(
        "y", (i, j), sum_(x[i, k] * W[j, k], over=k) + bb[j])]), "F.linear"))
    out.append((op("linear_no_bias", inputs=[x, W], outputs=[compute(
        "y", (i, j), sum_(x[i, k] * W[j, k], over=k))]), "F.linear"))
    (v,) = _t(("v", (K,)))
    out.append((op("mv", inputs=[A, v], outputs=[compute("y", (i,), sum_(A[i, k] * v[k],
                                                                           over=k))]),
                "torch.mv"))
    (c,) = _t(("c", (M,)))
    out.append((op("addmv", inputs=[c, A, v], outputs=[compute(
        "y", (i,), c[i] + sum_(A[i, k] * v[k], over=k))]), "torch.addmv"))
    u, w = _t(("x", (K,)), ("y", (K,)))
    out.append((op("dot", inputs=[u, w], outputs=[compute("out", (), sum_(u[k] * w[k],
                                                                            over=k))]),
                "torch.dot"))
    p, q = _t(("x", (M,)), ("y", (N,)))
    out.append((op("outer", inputs=[p, q], outputs=[compute("out", (i, j), p[i] * q[j])]),
                "torch.outer"))
    (c2,) = _t(("c", (M, N)))
    out.append((op("addr", inputs=[c2, p, q], outputs=[compute(
        "out", (i, j), c2[i, j] + p[i] * q[j])]), "torch.addr"))
    # einsum forms
    H, S, T, D = dims("H S T D")
    bq, hq, sq, tq = axes("b h s t", Bt, H, S, T)
    d = reduce_axis("d", D)
    Q, Kk = _t(("q", (Bt, H, S, D)), ("k", (Bt, H, T, D)))
    out.append((op("einsum_attention_scores", inputs=[Q, Kk], outputs=[compute(
        "y", (bq, hq, sq, tq), sum_(Q[bq, hq, sq, d] * Kk[bq, hq, tq, d], over=d))]),
        lambda t, p: __import__("torch").einsum("bhsd,bhtd->bhst", t["q"], t["k"])))
    X2, Y2 = _t(("x", (M, K)), ("y", (M, K)))
    out.append((op("einsum_row_dot", inputs=[X2, Y2], outputs=[compute(
        "out", (i,), sum_(X2[i, k] * Y2[i, k], over=k))]),
        lambda t, p: __import__("torch").einsum("ik,ik->i", t["x"], t["y"])))
    X3, Y3 = _t(("x", (M, N, K)), ("y", (M, K)))
    out.append((op("einsum_batched_mv", inputs=[X3, Y3], outputs=[compute(
        "out", (i, j), sum_(X3[i, j, k] * Y3[i, k], over=k))]),
        lambda t, p: __import__("torch").einsum("ijk,ik->ij", t["x"], t["y"])))
    # structured products
    dd, Ad = _t(("d", (M,)), ("A", (M, N)))
    out.append((op("diag_mm", inputs=[dd, Ad], outputs=[compute("y", (i, j), dd[i] * Ad[i, j])]),
                lambda t, p: __import__("torch").diag(t["d"]) @ t["A"]))
    Ae, de = _t(("A", (M, N)), ("d", (N,)))
    out.append((op("mm_diag", inputs=[Ae, de], outputs=[compute("y", (i, j), Ae[i, j] * de[j])]),
                lambda t, p: t["A"] @ __import__("torch").diag(t["d"])))
    L, R = _t(("A", (M, M)), ("B", (M, N)))
    kl = axis("k", i + 1, max_extent=M, reduce=True)
    out.append((op("tril_mm", inputs=[L, R], outputs=[compute(
        "y", (i, j), sum_(L[i, kl] * R[kl, j], over=kl))]),
        lambda t, p: __import__("torch").tril(t["A"]) @ t["B"]))
    ku = axis("k", M - i, start=i, max_extent=M, reduce=True)
    out.append((op("triu_mm", inputs=[L, R], outputs=[compute(
        "y", (i, j), sum_(L[i, ku] * R[ku, j], over=ku))]),
        lambda t, p: __import__("torch").triu(t["A"]) @ t["B"]))
    P = dims("P")
    Am, Bm, Cm = _t(("A", (M, K)), ("B", (K, P)), ("C", (P, N)))
    pp = reduce_axis("p", P)
    (i2, p2) = axes("i p", M, P)
    ab = compute("ab", (i2, p2), sum_(Am[i2, k] * Bm[k, p2], over=k))
    out.append((op("multi_dot", inputs=[Am, Bm, Cm], outputs=[compute(
        "y", (i, j), sum_(ab[i, pp] * Cm[pp, j], over=pp))]),
        lambda t, p: __import__("torch").linalg.multi_dot([t["A"], t["B"], t["C"]])))
    Qd = dims("Qd")
    Xk, Yk = _t(("x", (M, N)), ("y", (P, Qd)))
    ik, jk, pk, qk = axes("i j p q", M, N, P, Qd)
    out.append((op("kron", inputs=[Xk, Yk], outputs=[compute(
        "out", (ik, jk, pk, qk), Xk[ik, jk] * Yk[pk, qk], shape=(M * P, N * Qd),
        store=(ik * P + pk, jk * Qd + qk))]), "torch.kron"))
    Xc, Yc = _t(("x", (M, K)), ("y", (N, K)))
    out.append((op("cdist", inputs=[Xc, Yc], outputs=[compute(
        "out", (i, j), sqrt(sum_((Xc[i, k] - Yc[j, k]) * (Xc[i, k] - Yc[j, k]), over=k)))]),
        "torch.cdist"))
    (Tr,) = _t(("A", (M, N)))
    kt = reduce_axis("k", minimum(M, N))
    out.append((op("trace", inputs=[Tr], outputs=[compute("y", (), sum_(Tr[kt, kt], over=kt))]),
                "torch.trace"))
    K2 = dims("K2")
    Ta, Tb = _t(("A", (M, K, K2)), ("B", (K, K2, N)))
    k2 = reduce_axis("k2", K2)
    out.append((op("tensordot", inputs=[Ta, Tb], outputs=[compute(
        "y", (i, j), sum_(Ta[i, k, k2] * Tb[k, k2, j], over=(k, k2)))]),
        "torch.tensordot(dims=2)"))
    I_, J_, O_ = dims("I J O")
    x1, x2, Wb, bo = _t(("x1", (Bt, I_)), ("x2", (Bt, J_)), ("weight", (O_, I_, J_)),
                        ("bias", (O_,)))
    (bo_, oo) = axes("b o", Bt, O_)
    ri, rj = reduce_axis("ri", I_), reduce_axis("rj", J_)
    out.append((op("bilinear", inputs=[x1, x2, Wb, bo], outputs=[compute(
        "y", (bo_, oo), sum_(x1[bo_, ri] * Wb[oo, ri, rj] * x2[bo_, rj], over=(ri, rj))
        + bo[oo])]), "F.bilinear"))
    return out


OPS = {o.name: entry(o, ref, edges=at_least(o, {})) for o, ref in _ops()}
