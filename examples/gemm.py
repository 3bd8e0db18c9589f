"""Matrix multiplies with what follows them in a model: a bias and an activation, a scaled
residual, a row reduction, a gated pair (SwiGLU), and a batched multiply."""

from kevolve.ir.builder import (
    axes,
    axis,
    bf16,
    cast,
    compute,
    dims,
    f32,
    input,
    max_,
    maximum,
    op,
    reduce_axis,
    sigmoid,
    sum_,
)
from kevolve.ops import define

MNK = {"small": {"M": 8, "K": 12, "N": 16}, "cpu": {"M": 256, "K": 256, "N": 256},
       "gpu": {"M": 4096, "K": 4096, "N": 4096}}

# -- relu(A @ W + bias) ---------------------------------------------------------------------
M, K, N = dims("M K N")
A = input("A", (M, K), f32)
W = input("W", (K, N), f32)
bias = input("bias", (N,), f32)
i, j = axes("i j", M, N)
k = reduce_axis("k", K)
acc = compute("acc", (i, j), sum_(A[i, k] * W[k, j], over=k))
y = compute("y", (i, j), maximum(acc[i, j] + bias[j], 0.0))


def _gemm_bias_relu(t, _):
    import torch

    return torch.relu(torch.addmm(t["bias"], t["A"], t["W"]))


GEMM_BIAS_RELU = define(op("gemm_bias_relu", inputs=[A, W, bias], outputs=[y]),
                        presets=MNK, reference=_gemm_bias_relu,
                        doc="y = relu(A @ W + bias)")

# -- alpha * (A @ W) + residual, bf16 operands, f32 accumulation ----------------------------
M, K, N = dims("M K N")
A = input("A", (M, K), bf16)
W = input("W", (K, N), bf16)
R = input("residual", (M, N), bf16)
i, j = axes("i j", M, N)
k = reduce_axis("k", K)
y = compute("y", (i, j), 0.5 * sum_(cast(A[i, k], f32) * cast(W[k, j], f32), over=k)
            + cast(R[i, j], f32), dtype=bf16)   # the scale and the add in the dot's stage


def _gemm_scale_residual(t, _):
    import torch

    f = torch.promote_types(t["A"].dtype, torch.float32)  # f32, or f64 for the oracle
    A, W, R = (t[k].to(f) for k in ("A", "W", "residual"))
    return (0.5 * (A @ W) + R).to(t["A"].dtype)


GEMM_SCALE_RESIDUAL_BF16 = define(
    op("gemm_scale_residual_bf16", inputs=[A, W, R], outputs=[y]), presets=MNK,
    reference=_gemm_scale_residual, doc="y = 0.5 * (A @ W) + residual, bf16 in/out")

# -- row max of a product: max_j (A @ W)[i, j] (a GEMM followed by a reduction) -------------
M, K, N = dims("M K N")
A = input("A", (M, K), f32)
W = input("W", (K, N), f32)
i, j = axes("i j", M, N)
k = reduce_axis("k", K)
jj = reduce_axis("jj", N)
acc = compute("acc", (i, j), sum_(A[i, k] * W[k, j], over=k))
y = compute("y", (i,), max_(acc[i, jj], over=jj))


def _gemm_rowmax(t, _):
    return (t["A"] @ t["W"]).amax(dim=-1)


GEMM_ROWMAX = define(op("gemm_rowmax", inputs=[A, W], outputs=[y]), presets=MNK,
                     reference=_gemm_rowmax, doc="y[i] = max_j (A @ W)[i, j]")

# -- SwiGLU: silu(x @ Wg) * (x @ Wu) --------------------------------------------------------
M, K, N = dims("M K N")
x = input("x", (M, K), f32)
Wg = input("w_gate", (K, N), f32)
Wu = input("w_up", (K, N), f32)
i, j = axes("i j", M, N)
k = reduce_axis("k", K)
g = compute("g", (i, j), sum_(x[i, k] * Wg[k, j], over=k))
u = compute("u", (i, j), sum_(x[i, k] * Wu[k, j], over=k))
y = compute("y", (i, j), g[i, j] * sigmoid(g[i, j]) * u[i, j])


def _swiglu(t, _):
    import torch.nn.functional as F

    return F.silu(t["x"] @ t["w_gate"]) * (t["x"] @ t["w_up"])


SWIGLU = define(op("swiglu", inputs=[x, Wg, Wu], outputs=[y]), presets=MNK,
                reference=_swiglu, doc="y = silu(x @ w_gate) * (x @ w_up)")

# -- batched matmul: out[b] = X[b] @ Y[b] ----------------------------------------------------
Bt, M, K, N = dims("Bt M K N")
X = input("X", (Bt, M, K), f32)
Y = input("Y", (Bt, K, N), f32)
b, i, j = axes("b i j", Bt, M, N)
k = reduce_axis("k", K)
out = compute("out", (b, i, j), sum_(X[b, i, k] * Y[b, k, j], over=k))

BMM = define(op("bmm", inputs=[X, Y], outputs=[out]),
             presets={"small": {"Bt": 3, "M": 5, "K": 7, "N": 6},
                      "cpu": {"Bt": 16, "M": 128, "K": 64, "N": 128},
                      "gpu": {"Bt": 64, "M": 1024, "K": 128, "N": 1024}},
             reference="torch.bmm", doc="out[b] = X[b] @ Y[b]")

# -- attention scores with a causal mask: s[h, i, j] = q[h, i] . k[h, j] / sqrt(d), j <= i ----
H, S, Dh = dims("H S Dh")
q = input("q", (H, S, Dh), f32)
kt = input("k", (H, S, Dh), f32)
h, i = axes("h i", H, S)
j = axis("j", i + 1, max_extent=S)  # 0 <= j <= i: the causal triangle
dd = reduce_axis("dd", Dh)
sc = compute("scores", (h, i, j), sum_(q[h, i, dd] * kt[h, j, dd], over=dd)
             * (1.0 / 8.0), shape=(H, S, S), store=(h, i, j))


def _causal_scores(t, _):
    import torch

    s = (t["q"] @ t["k"].transpose(-1, -2)) / 8.0
    keep = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril()
    return torch.where(keep, s, torch.full_like(s, float("nan")))


CAUSAL_SCORES = define(op("causal_scores", inputs=[q, kt], outputs=[sc]),
                       presets={"small": {"H": 2, "S": 7, "Dh": 5},
                                "cpu": {"H": 8, "S": 256, "Dh": 64},
                                "gpu": {"H": 32, "S": 2048, "Dh": 64}},
                       reference=_causal_scores,
                       doc="scores[h, i, j] = q[h, i] . k[h, j] / 8 for j <= i (the upper "
                           "triangle is not written)")
