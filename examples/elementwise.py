"""Elementwise chains: activations and gates that torch runs as several kernels unless it
fuses them."""

import math

from kevolve.ir.builder import (
    abs_,
    axes,
    compute,
    dims,
    eq,
    exp,
    f32,
    input,
    log,
    maximum,
    minimum,
    op,
    sigmoid,
    tanh,
    where,
)
from kevolve.ops import define

SIZES = {"small": {"M": 7, "N": 13}, "cpu": {"M": 2048, "N": 1024},
         "gpu": {"M": 16384, "N": 8192}}


def _unary(name, body, reference, doc):
    """An elementwise op y = body(x) on an [M, N] f32 matrix."""
    M, N = dims("M N")
    x = input("x", (M, N), f32)
    i, j = axes("i j", M, N)
    y = compute("y", (i, j), body(x[i, j]))
    return define(op(name, inputs=[x], outputs=[y]), presets=SIZES, reference=reference,
                  doc=doc)


def _softplus(v):
    return where(v > 20.0, v, log(1.0 + exp(minimum(v, 20.0))))


GELU_TANH = _unary(
    "gelu_tanh",
    lambda v: 0.5 * v * (1.0 + tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v * v * v))),
    "F.gelu(approximate='tanh')", "y = gelu(x), tanh approximation")
SOFTPLUS = _unary("softplus", _softplus, "F.softplus", "y = log(1 + exp(x)) (x above 20: x)")
MISH = _unary("mish", lambda v: v * tanh(_softplus(v)), "F.mish", "y = x * tanh(softplus(x))")
HARDSWISH = _unary("hardswish", lambda v: v * minimum(maximum(v + 3.0, 0.0), 6.0) / 6.0,
                   "F.hardswish", "y = x * relu6(x + 3) / 6")
ELU = _unary("elu", lambda v: where(v > 0.0, v, exp(minimum(v, 0.0)) - 1.0), "F.elu",
             "y = x if x > 0 else exp(x) - 1")

# -- silu(a) * b (the gate of a SwiGLU MLP) --------------------------------------------------
M, N = dims("M N")
a = input("a", (M, N), f32)
b = input("b", (M, N), f32)
i, j = axes("i j", M, N)
y = compute("y", (i, j), a[i, j] * sigmoid(a[i, j]) * b[i, j])


def _silu_mul(t, _):
    import torch.nn.functional as F

    return F.silu(t["a"]) * t["b"]


SILU_MUL = define(op("silu_mul", inputs=[a, b], outputs=[y]), presets=SIZES,
                  reference=_silu_mul, doc="y = silu(a) * b")

# -- bias + scale + residual + clamp --------------------------------------------------------
M, N = dims("M N")
x = input("x", (M, N), f32)
bias = input("bias", (N,), f32)
r = input("residual", (M, N), f32)
i, j = axes("i j", M, N)
y = compute("y", (i, j), minimum(maximum((x[i, j] + bias[j]) * 0.7 + r[i, j], -4.0), 4.0))


def _bias_scale_residual_clamp(t, _):
    return ((t["x"] + t["bias"]) * 0.7 + t["residual"]).clamp(-4.0, 4.0)


BIAS_SCALE_RESIDUAL_CLAMP = define(
    op("bias_scale_residual_clamp", inputs=[x, bias, r], outputs=[y]), presets=SIZES,
    reference=_bias_scale_residual_clamp, doc="y = clamp((x + bias) * 0.7 + residual, -4, 4)")

# -- rotary position embedding on [S, 2, H]: rotate the pair (x[s, 0, h], x[s, 1, h]) --------
S, H = dims("S H")
x = input("x", (S, 2, H), f32)
cos = input("cos", (S, H), f32)
sin = input("sin", (S, H), f32)
s, c, h = axes("s c h", S, 2, H)
other = x[s, 1 - c, h]
sign = where(eq(c, 0), -1.0, 1.0)
y = compute("y", (s, c, h), x[s, c, h] * cos[s, h] + sign * other * sin[s, h])


def _rope(t, _):
    import torch

    x0, x1 = t["x"][:, 0], t["x"][:, 1]
    cs, sn = t["cos"], t["sin"]
    return torch.stack([x0 * cs - x1 * sn, x1 * cs + x0 * sn], dim=1)


ROPE = define(op("rope", inputs=[x, cos, sin], outputs=[y]),
              presets={"small": {"S": 7, "H": 5}, "cpu": {"S": 4096, "H": 256},
                       "gpu": {"S": 65536, "H": 1024}},
              reference=_rope, doc="rotary embedding of (x0, x1) pairs by (cos, sin)")

# -- |x - y| ** 1.5 weighted by a per-column factor (a pow of a non-negative base) -----------
M, N = dims("M N")
x = input("x", (M, N), f32)
yy = input("y", (M, N), f32)
w = input("w", (N,), f32)
i, j = axes("i j", M, N)
out = compute("out", (i, j), w[j] * abs_(x[i, j] - yy[i, j]) ** 1.5)


def _weighted_pow(t, _):
    return t["w"] * (t["x"] - t["y"]).abs().pow(1.5)


WEIGHTED_POW = define(op("weighted_pow", inputs=[x, yy, w], outputs=[out]), presets=SIZES,
                      reference=_weighted_pow, doc="out = w * |x - y|^1.5")
