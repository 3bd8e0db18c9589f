"""Row-wise normalizations over the last dim of [M, N]: softmax, log_softmax, layernorm,
rmsnorm. Each is a few stages (row statistics, then a pointwise stage) so a schedule can
choose between one pass per statistic, an online reduction, or one tile per row."""

from __future__ import annotations

from ..ir.builder import (
    axes,
    cast,
    compute,
    dims,
    exp,
    f32,
    input,
    log,
    max_,
    op,
    reduce_axis,
    rsqrt,
    sum_,
)
from .base import OpDef

NORM_DTYPES = ("f32", "bf16", "f16")


def _rows():
    M, N = dims("M N")
    i, j = axes("i j", M, N)
    return M, N, i, j, reduce_axis("k", N)


def softmax_op():
    M, N, i, j, k = _rows()
    x = input("x", (M, N), f32)
    mx = compute("mx", (i,), max_(x[i, k], over=k))
    e = compute("e", (i, j), exp(x[i, j] - mx[i]))
    s = compute("s", (i,), sum_(e[i, k], over=k))
    y = compute("y", (i, j), e[i, j] / s[i])
    return op("softmax", inputs=[x], outputs=[y])


def log_softmax_op():
    M, N, i, j, k = _rows()
    x = input("x", (M, N), f32)
    mx = compute("mx", (i,), max_(x[i, k], over=k))
    s = compute("s", (i,), sum_(exp(x[i, k] - mx[i]), over=k))
    y = compute("y", (i, j), x[i, j] - mx[i] - log(s[i]))
    return op("log_softmax", inputs=[x], outputs=[y])


def layernorm_op(dtype: str = "f32", eps: float = 1e-5):
    """Statistics in f32 whatever the storage type (what torch does for bf16 too)."""
    M, N, i, j, k = _rows()
    x = input("x", (M, N), dtype)
    w = input("weight", (N,), dtype)
    b = input("bias", (N,), dtype)
    mean = compute("mean", (i,), sum_(cast(x[i, k], f32), over=k) / cast(N, f32))
    c = cast(x[i, k], f32) - mean[i]
    var = compute("var", (i,), sum_(c * c, over=k) / cast(N, f32))
    rstd = compute("rstd", (i,), rsqrt(var[i] + eps))
    y = compute("y", (i, j), (cast(x[i, j], f32) - mean[i]) * rstd[i] * cast(w[j], f32)
                + cast(b[j], f32), dtype=dtype)
    return op("layernorm", inputs=[x, w, b], outputs=[y])


def rmsnorm_op(dtype: str = "f32", eps: float = 1e-6):
    M, N, i, j, k = _rows()
    x = input("x", (M, N), dtype)
    w = input("weight", (N,), dtype)
    xk = cast(x[i, k], f32)
    rstd = compute("rstd", (i,), rsqrt(sum_(xk * xk, over=k) / cast(N, f32) + eps))
    y = compute("y", (i, j), cast(x[i, j], f32) * rstd[i] * cast(w[j], f32), dtype=dtype)
    return op("rmsnorm", inputs=[x, w], outputs=[y])


def _softmax_torch(t, p):
    import torch

    return {"y": torch.softmax(t["x"], dim=-1)}


def _log_softmax_torch(t, p):
    import torch

    return {"y": torch.log_softmax(t["x"], dim=-1)}


def _layernorm_torch(t, p):
    import torch.nn.functional as F

    x = t["x"]
    return {"y": F.layer_norm(x, (x.shape[-1],), t["weight"], t["bias"], eps=1e-5)}


def _rmsnorm_torch(t, p):
    import torch.nn.functional as F

    x = t["x"]
    return {"y": F.rms_norm(x, (x.shape[-1],), t["weight"], eps=1e-6)}


_ROW_EDGES = ({"M": 1, "N": 1}, {"M": 1, "N": 129}, {"M": 3, "N": 1000}, {"M": 7, "N": 64})


def _with_dtype(shapes, dtype):
    return tuple(dict(s, dtype=dtype) for s in shapes)


SOFTMAX = OpDef(
    "softmax", softmax_op(),
    shapes={"small": {"M": 6, "N": 50}, "cpu": {"M": 4096, "N": 4096},
            "gpu": {"M": 8192, "N": 8192}},
    torch_eager=_softmax_torch, edge_shapes=_ROW_EDGES,
    doc="y = softmax(x) over the last dim, f32",
)

LOG_SOFTMAX = OpDef(
    "log_softmax", log_softmax_op(),
    shapes={"small": {"M": 6, "N": 50}, "cpu": {"M": 4096, "N": 4096},
            "gpu": {"M": 8192, "N": 8192}},
    torch_eager=_log_softmax_torch, edge_shapes=_ROW_EDGES,
    doc="y = x - max - log(sum(exp(x - max))) over the last dim, f32",
)

_LN_VARIANTS = {d: layernorm_op(d) for d in NORM_DTYPES}
LAYERNORM = OpDef(
    "layernorm", _LN_VARIANTS["f32"],
    shapes={"small": {"M": 5, "N": 48, "dtype": "f32"},
            "cpu": {"M": 4096, "N": 4096, "dtype": "f32"},
            "gpu": {"M": 16384, "N": 4096, "dtype": "bf16"}},
    torch_eager=_layernorm_torch,
    edge_shapes=_with_dtype(_ROW_EDGES, "f32") + _with_dtype(({"M": 4, "N": 33},), "bf16"),
    doc="y = (x - mean) * rsqrt(var + 1e-5) * weight + bias, stats in f32, y in x's dtype",
    variants=_LN_VARIANTS,
)

_RMS_VARIANTS = {d: rmsnorm_op(d) for d in NORM_DTYPES}
RMSNORM = OpDef(
    "rmsnorm", _RMS_VARIANTS["f32"],
    shapes={"small": {"M": 5, "N": 48, "dtype": "f32"},
            "cpu": {"M": 4096, "N": 4096, "dtype": "f32"},
            "gpu": {"M": 16384, "N": 4096, "dtype": "bf16"}},
    torch_eager=_rmsnorm_torch,
    edge_shapes=_with_dtype(_ROW_EDGES, "f32") + _with_dtype(({"M": 4, "N": 33},), "bf16"),
    doc="y = x * rsqrt(mean(x^2) + 1e-6) * weight, stats in f32, y in x's dtype",
    variants=_RMS_VARIANTS,
)
