"""Matrix multiply, alone and with a fused epilogue. The contraction is one stage and the
epilogue another, so fusing the epilogue into the GEMM's store is a schedule decision."""

from __future__ import annotations

import math

from ..ir.builder import axes, bf16, cast, compute, dims, erf, f32, input, op, reduce_axis, sum_
from .base import OpDef


def gelu(v):
    """The exact (erf) GELU, torch's default: 0.5 * v * (1 + erf(v / sqrt(2)))."""
    return 0.5 * v * (1.0 + erf(v * (1.0 / math.sqrt(2.0))))


def gemm_op():
    M, K, N = dims("M K N")
    A = input("A", (M, K), f32)
    W = input("W", (K, N), f32)
    i, j = axes("i j", M, N)
    k = reduce_axis("k", K)
    y = compute("y", (i, j), sum_(A[i, k] * W[k, j], over=k))
    return op("gemm", inputs=[A, W], outputs=[y])


def gemm_bias_gelu_op():
    """bf16 operands, f32 products and accumulator (as tensor cores do), bf16 result."""
    M, K, N = dims("M K N")
    A = input("A", (M, K), bf16)
    W = input("W", (K, N), bf16)
    bias = input("bias", (N,), bf16)
    i, j = axes("i j", M, N)
    k = reduce_axis("k", K)
    acc = compute("acc", (i, j), sum_(cast(A[i, k], f32) * cast(W[k, j], f32), over=k))
    y = compute("y", (i, j), gelu(acc[i, j] + cast(bias[j], f32)), dtype=bf16)
    return op("gemm_bias_gelu", inputs=[A, W, bias], outputs=[y])


def _gemm_torch(t, p):
    return {"y": t["A"] @ t["W"]}


def _gemm_bias_gelu_torch(t, p):
    import torch
    import torch.nn.functional as F

    return {"y": F.gelu(torch.addmm(t["bias"], t["A"], t["W"]))}


_EDGES = ({"M": 1, "K": 1, "N": 1}, {"M": 1, "K": 33, "N": 17}, {"M": 13, "K": 7, "N": 100})

GEMM = OpDef(
    "gemm", gemm_op(),
    shapes={"small": {"M": 8, "K": 12, "N": 16}, "cpu": {"M": 1024, "K": 1024, "N": 1024},
            "gpu": {"M": 4096, "K": 4096, "N": 4096}},
    torch_eager=_gemm_torch,
    edge_shapes=_EDGES, doc="y = A @ W, f32",
)

GEMM_BIAS_GELU = OpDef(
    "gemm_bias_gelu", gemm_bias_gelu_op(),
    shapes={"small": {"M": 8, "K": 12, "N": 16}, "cpu": {"M": 512, "K": 1024, "N": 1024},
            "gpu": {"M": 8192, "K": 4096, "N": 4096}},
    torch_eager=_gemm_bias_gelu_torch,
    edge_shapes=_EDGES, doc="y = gelu(A @ W + bias), erf gelu, bf16 in/out, f32 accumulate",
)
