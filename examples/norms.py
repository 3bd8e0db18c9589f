"""Fused normalizations: a residual add, a norm and an affine map in one operator, as a
transformer block writes them. out[i, :] depends on the whole row i."""

from kevolve.ir.builder import (
    axes,
    bf16,
    cast,
    compute,
    dims,
    f32,
    input,
    maximum,
    op,
    reduce_axis,
    rsqrt,
    sqrt,
    sum_,
)
from kevolve.ops import define

SIZES = {"small": {"M": 7, "N": 13}, "cpu": {"M": 2048, "N": 1024},
         "gpu": {"M": 16384, "N": 4096}}

# -- residual add + RMSNorm -----------------------------------------------------------------
M, N = dims("M N")
x = input("x", (M, N), f32)
res = input("residual", (M, N), f32)
w = input("weight", (N,), f32)
i, j = axes("i j", M, N)
k = reduce_axis("k", N)
h = compute("h", (i, j), x[i, j] + res[i, j])
ms = compute("ms", (i,), sum_(h[i, k] * h[i, k], over=k) / cast(N, f32))
y = compute("y", (i, j), h[i, j] * rsqrt(ms[i] + 1e-6) * w[j])


def _add_rmsnorm(t, p):
    import torch

    h = t["x"] + t["residual"]
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * t["weight"]


ADD_RMSNORM = define(op("add_rmsnorm", inputs=[x, res, w], outputs=[y]),
                     presets=SIZES, reference=_add_rmsnorm,
                     doc="y = rmsnorm(x + residual) * weight")

# -- residual add + RMSNorm, returning the new residual too (two outputs, one kernel) ------
# A transformer block keeps h = x + residual for the next block's residual and normalizes
# it: both are outputs. The default schedule computes h in y's program and stores it from
# there (compute_at on an output), so x and residual are read once for both.
M, N = dims("M N")
x = input("x", (M, N), f32)
res = input("residual", (M, N), f32)
w = input("weight", (N,), f32)
i, j = axes("i j", M, N)
k = reduce_axis("k", N)
h = compute("h", (i, j), x[i, j] + res[i, j])
ms = compute("ms", (i,), sum_(h[i, k] * h[i, k], over=k) / cast(N, f32))
y = compute("y", (i, j), h[i, j] * rsqrt(ms[i] + 1e-6) * w[j])


def _fused_add_rmsnorm(t, p):
    import torch

    h = t["x"] + t["residual"]
    return h, h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * t["weight"]


FUSED_ADD_RMSNORM = define(op("fused_add_rmsnorm", inputs=[x, res, w], outputs=[h, y]),
                           presets=SIZES, reference=_fused_add_rmsnorm,
                           doc="h = x + residual; y = rmsnorm(h) * weight (both returned)")

# -- LayerNorm returning its statistics (mean, rstd, y), as a training forward keeps them ---
M, N = dims("M N")
x = input("x", (M, N), f32)
w = input("weight", (N,), f32)
b = input("bias", (N,), f32)
i, j = axes("i j", M, N)
k = reduce_axis("k", N)
mean = compute("mean", (i,), sum_(x[i, k], over=k) / cast(N, f32))
var = compute("var", (i,), sum_((x[i, k] - mean[i]) * (x[i, k] - mean[i]), over=k)
              / cast(N, f32))
rstd = compute("rstd", (i,), rsqrt(var[i] + 1e-5))
y = compute("y", (i, j), (x[i, j] - mean[i]) * rstd[i] * w[j] + b[j])


def _layernorm_stats(t, p):
    import torch

    x = t["x"]
    mean = x.mean(-1)
    rstd = torch.rsqrt(x.var(-1, unbiased=False) + 1e-5)
    y = (x - mean[:, None]) * rstd[:, None] * t["weight"] + t["bias"]
    return mean, rstd, y


LAYERNORM_STATS = define(op("layernorm_stats", inputs=[x, w, b], outputs=[mean, rstd, y]),
                         presets=SIZES, reference=_layernorm_stats,
                         doc="y = layernorm(x) * weight + bias, with mean and rstd per row")

# -- residual add + LayerNorm ---------------------------------------------------------------
M, N = dims("M N")
x = input("x", (M, N), f32)
res = input("residual", (M, N), f32)
w = input("weight", (N,), f32)
b = input("bias", (N,), f32)
i, j = axes("i j", M, N)
k = reduce_axis("k", N)
h = compute("h", (i, j), x[i, j] + res[i, j])
mean = compute("mean", (i,), sum_(h[i, k], over=k) / cast(N, f32))
var = compute("var", (i,), sum_((h[i, k] - mean[i]) * (h[i, k] - mean[i]), over=k)
              / cast(N, f32))
y = compute("y", (i, j), (h[i, j] - mean[i]) * rsqrt(var[i] + 1e-5) * w[j] + b[j])


def _add_layernorm(t, p):
    import torch.nn.functional as F

    h = t["x"] + t["residual"]
    return F.layer_norm(h, h.shape[-1:], t["weight"], t["bias"], 1e-5)


ADD_LAYERNORM = define(op("add_layernorm", inputs=[x, res, w, b], outputs=[y]),
                       presets=SIZES, reference=_add_layernorm,
                       doc="y = layernorm(x + residual) * weight + bias")

# -- L2 normalization of rows (F.normalize) -------------------------------------------------
M, N = dims("M N")
x = input("x", (M, N), f32)
i, j = axes("i j", M, N)
k = reduce_axis("k", N)
nrm = compute("nrm", (i,), sqrt(sum_(x[i, k] * x[i, k], over=k)))
y = compute("y", (i, j), x[i, j] / maximum(nrm[i], 1e-12))

L2_NORMALIZE = define(op("l2_normalize", inputs=[x], outputs=[y]), presets=SIZES,
                      reference="F.normalize(dim=-1)", doc="y = x / max(||x||_2, eps) per row")

# -- RMSNorm in bf16, statistics in f32, with a learned scale (1 + w) as in Gemma ------------
M, N = dims("M N")
x = input("x", (M, N), bf16)
w = input("weight", (N,), bf16)
i, j = axes("i j", M, N)
k = reduce_axis("k", N)
ms = compute("ms", (i,), sum_(cast(x[i, k], f32) * cast(x[i, k], f32), over=k)
             / cast(N, f32))
y = compute("y", (i, j), cast(x[i, j], f32) * rsqrt(ms[i] + 1e-6)
            * (1.0 + cast(w[j], f32)), dtype=bf16)


def _gemma_rmsnorm(t, p):
    import torch

    f = torch.promote_types(t["x"].dtype, torch.float32)  # f32, or f64 for the oracle
    xf, w = t["x"].to(f), t["weight"].to(f)
    out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * (1.0 + w)
    return out.to(t["x"].dtype)


GEMMA_RMSNORM_BF16 = define(op("gemma_rmsnorm_bf16", inputs=[x, w], outputs=[y]),
                            presets=SIZES, reference=_gemma_rmsnorm,
                            doc="y = rmsnorm(x) * (1 + weight), bf16 storage, f32 statistics")
