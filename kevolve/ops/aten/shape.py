"""Shape-moving operators that need a kernel (a copy with an index map): cat, stack,
transpose and permute copies, pad (constant, reflect, replicate, circular), repeat,
repeat_interleave, flip, roll, tril/triu, diagonal, diag_embed, unfold, pixel_shuffle,
nearest upsampling, narrow. Each is `out[axes] = x[index map]`, a where() choosing the
source where there are two; reads the where() does not take may fall outside x."""

from __future__ import annotations

from ...ir.builder import abs_, axes, compute, dims, eq, f32, input, maximum, minimum, op, where
from ._entry import at_least, entry


def _ops():
    M, N, P = dims("M N P")
    x = input("x", (M, N), f32)
    y2 = input("y", (P, N), f32)
    out = []
    i, j = axes("i j", M + P, N)
    out.append((op("cat", inputs=[x, y2], outputs=[compute(
        "out", (i, j), where(i < M, x[i, j], y2[i - M, j]))]),
        lambda t, p: __import__("torch").cat([t["x"], t["y"]], 0), {}))
    y3 = input("y", (M, P), f32)
    i1, j1 = axes("i j", M, N + P)
    out.append((op("cat_dim1", inputs=[x, y3], outputs=[compute(
        "out", (i1, j1), where(j1 < N, x[i1, j1], y3[i1, j1 - N]))]),
        lambda t, p: __import__("torch").cat([t["x"], t["y"]], 1), {}))
    ys = input("y", (M, N), f32)
    s, i2, j2 = axes("s i j", 2, M, N)
    out.append((op("stack", inputs=[x, ys], outputs=[compute(
        "out", (s, i2, j2), where(eq(s, 0), x[i2, j2], ys[i2, j2]))]),
        lambda t, p: __import__("torch").stack([t["x"], t["y"]]), {}))
    jt, it = axes("j i", N, M)
    out.append((op("transpose", inputs=[x], outputs=[compute("y", (jt, it), x[it, jt])]),
                lambda t, p: t["x"].t().contiguous(), {}))
    A, B, C = dims("A B C")
    x3 = input("x", (A, B, C), f32)
    a, c, b = axes("a c b", A, C, B)
    out.append((op("permute_021", inputs=[x3], outputs=[compute("y", (a, c, b), x3[a, b, c])]),
                lambda t, p: t["x"].permute(0, 2, 1).contiguous(), {}))
    c2, a2, b2 = axes("c a b", C, A, B)
    out.append((op("permute_201", inputs=[x3], outputs=[compute("y", (c2, a2, b2),
                                                                 x3[a2, b2, c2])]),
                lambda t, p: t["x"].permute(2, 0, 1).contiguous(), {}))
    ip, jp = axes("i j", M, N + 3)
    out.append((op("pad_constant", inputs=[x], outputs=[compute(
        "y", (ip, jp), where((jp >= 1) & (jp < N + 1), x[ip, jp - 1], 0.0))]),
        lambda t, p: __import__("torch").nn.functional.pad(t["x"], (1, 2)), {}))
    ir_, jr = axes("i j", M, N + 4)
    q = abs_(jr - 2)
    out.append((op("pad_reflect", inputs=[x], outputs=[compute(
        "y", (ir_, jr), x[ir_, (N - 1) - abs_((N - 1) - q)])]),
        lambda t, p: __import__("torch").nn.functional.pad(t["x"], (2, 2), mode="reflect"),
        {"N": 3}))
    out.append((op("pad_replicate", inputs=[x], outputs=[compute(
        "y", (ir_, jr), x[ir_, minimum(maximum(jr - 2, 0), N - 1)])]),
        lambda t, p: __import__("torch").nn.functional.pad(t["x"], (2, 2), mode="replicate"),
        {}))
    out.append((op("pad_circular", inputs=[x], outputs=[compute(
        "y", (ir_, jr), x[ir_, (jr + N * 2 - 2) % N])]),
        lambda t, p: __import__("torch").nn.functional.pad(t["x"], (2, 2), mode="circular"),
        {"N": 2}))
    ie, je = axes("i j", M * 2, N * 3)
    out.append((op("repeat", inputs=[x], outputs=[compute("y", (ie, je), x[ie % M, je % N])]),
                lambda t, p: t["x"].repeat(2, 3), {}))
    ik, jk = axes("i j", M, N * 2)
    out.append((op("repeat_interleave", inputs=[x], outputs=[compute(
        "y", (ik, jk), x[ik, jk // 2])]),
        lambda t, p: t["x"].repeat_interleave(2, dim=1), {}))
    i4, j4 = axes("i j", M, N)
    out.append((op("flip", inputs=[x], outputs=[compute("y", (i4, j4), x[i4, N - 1 - j4])]),
                lambda t, p: t["x"].flip(1), {}))
    out.append((op("flip_all", inputs=[x], outputs=[compute(
        "y", (i4, j4), x[M - 1 - i4, N - 1 - j4])]), lambda t, p: t["x"].flip((0, 1)), {}))
    out.append((op("roll", inputs=[x], outputs=[compute(
        "y", (i4, j4), x[i4, (j4 + N * 2 - 2) % N])]),
        lambda t, p: t["x"].roll(2, 1), {}))
    out.append((op("tril", inputs=[x], outputs=[compute(
        "y", (i4, j4), where(j4 <= i4, x[i4, j4], 0.0))]), "torch.tril", {}))
    out.append((op("triu", inputs=[x], outputs=[compute(
        "y", (i4, j4), where(j4 >= i4, x[i4, j4], 0.0))]), "torch.triu", {}))
    out.append((op("triu_diagonal1", inputs=[x], outputs=[compute(
        "y", (i4, j4), where(j4 >= i4 + 1, x[i4, j4], 0.0))]), "torch.triu(diagonal=1)", {}))
    (kd,) = axes("k", minimum(M, N))
    out.append((op("diagonal", inputs=[x], outputs=[compute("y", (kd,), x[kd, kd])]),
                lambda t, p: t["x"].diagonal().contiguous(), {}))
    v = input("v", (N,), f32)
    ia, ja = axes("i j", N, N)
    out.append((op("diag_embed", inputs=[v], outputs=[compute(
        "y", (ia, ja), where(eq(ia, ja), v[ia], 0.0))]), "torch.diag_embed", {}))
    iu, ju, tu = axes("i j t", M, N - 2, 3)
    out.append((op("unfold", inputs=[x], outputs=[compute(
        "y", (iu, ju, tu), x[iu, ju + tu])]),
        lambda t, p: t["x"].unfold(1, 3, 1).contiguous(), {"N": 3}))
    Bq, Cq, H, W = dims("B C H W")
    xs = input("x", (Bq, Cq, 2, 2, H, W), f32)
    bq, cq, hq, r1, wq, r2 = axes("b c h r1 w r2", Bq, Cq, H, 2, W, 2)
    out.append((op("pixel_shuffle", inputs=[xs], outputs=[compute(
        "y", (bq, cq, hq, r1, wq, r2), xs[bq, cq, r1, r2, hq, wq], shape=(Bq, Cq, H * 2, W * 2),
        store=(bq, cq, hq * 2 + r1, wq * 2 + r2))]), _pixel_shuffle, {}))
    xu = input("x", (Bq, Cq, H, W), f32)
    bu, cu, hu, wu = axes("b c h w", Bq, Cq, H * 2, W * 2)
    out.append((op("upsample_nearest2d", inputs=[xu], outputs=[compute(
        "y", (bu, cu, hu, wu), xu[bu, cu, hu // 2, wu // 2])]),
        lambda t, p: __import__("torch").nn.functional.interpolate(t["x"], scale_factor=2,
                                                                   mode="nearest"), {}))
    (i5, j5) = axes("i j", M, N - 1)
    out.append((op("narrow", inputs=[x], outputs=[compute("y", (i5, j5), x[i5, j5 + 1])]),
                lambda t, p: t["x"].narrow(1, 1, t["x"].shape[1] - 1).contiguous(), {"N": 2}))
    return out


def _pixel_shuffle(t, p):
    import torch.nn.functional as F

    x = t["x"]
    B, C, _, _, H, W = x.shape
    return F.pixel_shuffle(x.reshape(B, C * 4, H, W), 2)


OPS = {}
for _o, _ref, _mins in _ops():
    OPS[_o.name] = entry(_o, _ref, edges=at_least(_o, _mins))
