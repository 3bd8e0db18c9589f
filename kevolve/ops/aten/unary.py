"""Pointwise unary operators over x[M, N]: every activation of torch.nn.functional and the
elementwise math of ATen. One table row per operator: its formula on an f32 operand, its
torch reference and, where ATen's domain is narrower than the reals, the input domain.
Each op comes in f32, bf16 and f16 (math in f32, stored in the input's dtype)."""

from __future__ import annotations

import math

from ...ir.builder import (
    abs_,
    axes,
    ceil,
    compute,
    cos,
    dims,
    eq,
    erf,
    exp,
    expm1,
    floor,
    input,
    log,
    log1p,
    maximum,
    minimum,
    op,
    round_,
    rsqrt,
    scalar,
    sigmoid,
    sin,
    sqrt,
    tanh,
    trunc,
    where,
)
from ..spec import domain
from ._entry import HALF, at_least, entry, f, with_half

_SELU_A, _SELU_S = 1.6732632423543772, 1.0507009873554805
_RRELU = (1.0 / 8.0 + 1.0 / 3.0) / 2.0  # eval-mode slope: the mean of [lower, upper]


def _softplus(x):
    return where(x > 20.0, x, log1p(exp(minimum(x, 20.0))))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


# name -> (formula of an f32 operand, torch reference, input domain or None)
TABLE: dict[str, tuple] = {
    # activations (torch.nn.functional)
    "relu": (lambda x: maximum(x, 0.0), "torch.relu", None),
    "relu6": (lambda x: minimum(maximum(x, 0.0), 6.0), "F.relu6", domain(-8.0, 8.0)),
    "elu": (lambda x: where(x > 0.0, x, expm1(x)), "F.elu", None),
    "selu": (lambda x: _SELU_S * where(x > 0.0, x, _SELU_A * expm1(x)), "F.selu", None),
    "celu": (lambda x: maximum(x, 0.0) + minimum(expm1(x * 2.0) * 0.5, 0.0),
             "F.celu(alpha=0.5)", None),
    "gelu": (lambda x: 0.5 * x * (1.0 + erf(x * 0.7071067811865476)), "F.gelu", None),
    "gelu_tanh": (_gelu_tanh, "F.gelu(approximate='tanh')", None),
    "silu": (lambda x: x * sigmoid(x), "F.silu", None),
    "mish": (lambda x: x * tanh(_softplus(x)), "F.mish", None),
    "softplus": (_softplus, "F.softplus", None),
    "softsign": (lambda x: x / (1.0 + abs_(x)), "F.softsign", None),
    "hardtanh": (lambda x: minimum(maximum(x, -1.0), 1.0), "F.hardtanh", None),
    "hardsigmoid": (lambda x: minimum(maximum(x / 6.0 + 0.5, 0.0), 1.0), "F.hardsigmoid",
                    domain(-5.0, 5.0)),
    "hardswish": (lambda x: x * minimum(maximum(x + 3.0, 0.0), 6.0) / 6.0, "F.hardswish",
                  domain(-5.0, 5.0)),
    "leaky_relu": (lambda x: where(x > 0.0, x, x * 0.01), "F.leaky_relu", None),
    "rrelu": (lambda x: where(x >= 0.0, x, x * _RRELU), "F.rrelu(training=False)", None),
    "logsigmoid": (lambda x: minimum(x, 0.0) - log1p(exp(-abs_(x))), "F.logsigmoid", None),
    "tanhshrink": (lambda x: x - tanh(x), "F.tanhshrink", None),
    "softshrink": (lambda x: where(x > 0.5, x - 0.5, where(x < -0.5, x + 0.5, 0.0)),
                   "F.softshrink", None),
    "hardshrink": (lambda x: where(abs_(x) > 0.5, x, 0.0), "F.hardshrink", None),
    "threshold": (lambda x: where(x > 0.1, x, 20.0), "F.threshold(threshold=0.1, value=20.0)",
                  None),
    "sigmoid": (sigmoid, "torch.sigmoid", None),
    "tanh": (tanh, "torch.tanh", None),
    # elementwise math
    "abs": (abs_, "torch.abs", None),
    "neg": (lambda x: -x, "torch.neg", None),
    "positive": (lambda x: x, "torch.positive", None),
    "square": (lambda x: x * x, "torch.square", None),
    "reciprocal": (lambda x: 1.0 / x, "torch.reciprocal", domain(nonzero=True)),
    "sign": (lambda x: where(x > 0.0, 1.0, where(x < 0.0, -1.0, 0.0)), "torch.sign", None),
    "sgn": (lambda x: where(x > 0.0, 1.0, where(x < 0.0, -1.0, 0.0)), "torch.sgn", None),
    "exp": (exp, "torch.exp", None),
    "exp2": (lambda x: exp(x * math.log(2.0)), "torch.exp2", None),
    "expm1": (expm1, "torch.expm1", None),
    "log": (log, "torch.log", domain(positive=True)),
    "log2": (lambda x: log(x) * (1.0 / math.log(2.0)), "torch.log2", domain(positive=True)),
    "log10": (lambda x: log(x) * (1.0 / math.log(10.0)), "torch.log10",
              domain(positive=True)),
    "log1p": (log1p, "torch.log1p", domain(-0.9, 4.0)),
    "sqrt": (sqrt, "torch.sqrt", domain(positive=True)),
    "rsqrt": (rsqrt, "torch.rsqrt", domain(positive=True)),
    "erf": (erf, "torch.erf", None),
    "erfc": (lambda x: 1.0 - erf(x), "torch.erfc", domain(-3.0, 1.0)),
    "floor": (floor, "torch.floor", domain(-50.0, 50.0)),
    "ceil": (ceil, "torch.ceil", domain(-50.0, 50.0)),
    "trunc": (trunc, "torch.trunc", domain(-50.0, 50.0)),
    "fix": (trunc, "torch.fix", domain(-50.0, 50.0)),
    "round": (round_, "torch.round", domain(-50.0, 50.0)),
    "frac": (lambda x: x - trunc(x), "torch.frac", domain(-50.0, 50.0)),
    "sin": (sin, "torch.sin", None),
    "cos": (cos, "torch.cos", None),
    "tan": (lambda x: sin(x) / cos(x), "torch.tan", domain(-1.3, 1.3)),
    "sinh": (lambda x: (exp(x) - exp(-x)) * 0.5, "torch.sinh", None),
    "cosh": (lambda x: (exp(x) + exp(-x)) * 0.5, "torch.cosh", None),
    "asinh": (lambda x: where(x < 0.0, -log(-x + sqrt(x * x + 1.0)),
                              log(x + sqrt(x * x + 1.0))), "torch.asinh", None),
    "acosh": (lambda x: log(x + sqrt(x * x - 1.0)), "torch.acosh", domain(1.1, 5.0)),
    "atanh": (lambda x: 0.5 * log((1.0 + x) / (1.0 - x)), "torch.atanh", domain(-0.9, 0.9)),
    "sinc": (lambda x: where(abs_(x) < 1e-4, 1.0 - x * x * (math.pi ** 2 / 6.0),
                             sin(x * math.pi) / (x * math.pi)), "torch.sinc", None),
    "deg2rad": (lambda x: x * (math.pi / 180.0), "torch.deg2rad", None),
    "rad2deg": (lambda x: x * (180.0 / math.pi), "torch.rad2deg", None),
    "logit": (lambda x: log(x / (1.0 - x)), "torch.logit", domain(0.05, 0.95)),
    "clamp": (lambda x: minimum(maximum(x, -0.5), 0.5), "torch.clamp(min=-0.5, max=0.5)",
              None),
    "clamp_min": (lambda x: maximum(x, 0.25), "torch.clamp(min=0.25)", None),
    "clamp_max": (lambda x: minimum(x, 0.25), "torch.clamp(max=0.25)", None),
    "logical_not": (lambda x: where(eq(x, 0.0), 1.0, 0.0), "torch.logical_not",
                    domain(-1.0, 1.0, integer=True)),
    "nan_to_num": (lambda x: x, "torch.nan_to_num", None),
    "pow_scalar": (lambda x: x ** 3, "torch.pow(exponent=3)", None),
    "pow_fractional": (lambda x: x ** 1.5, "torch.pow(exponent=1.5)", domain(positive=True)),
    "float_power_half": (lambda x: x ** 0.5, "torch.pow(exponent=0.5)",
                         domain(positive=True)),
    "mul_scalar": (lambda x: x * 2.5, "torch.mul(other=2.5)", None),
    "add_scalar": (lambda x: x + 1.5, "torch.add(other=1.5)", None),
}


def unary_op(name: str, fn, dtype: str = "f32"):
    M, N = dims("M N")
    x = input("x", (M, N), dtype)
    i, j = axes("i j", M, N)
    return op(name, inputs=[x], outputs=[compute("y", (i, j), fn(f(x[i, j])), dtype=dtype)])


def _make(name: str, fn, ref, dom):
    variants = {d: unary_op(name, fn, d) for d in ("f32",) + HALF}
    edges = with_half(at_least(variants["f32"], {}))
    return entry(variants, ref, inputs={"x": dom} if dom is not None else None, edges=edges)


OPS = {name: _make(name, *row) for name, row in TABLE.items()}


# Operators with a float argument that varies per call: a scalar() input (a 0-d tensor,
# drawn from its domain; a shape dict may fix it: {"s": 0.2}).
# name -> (formula of (x, s), torch reference of (x, s as a Python float), domain of s)
PARAMETRIC: dict[str, tuple] = {
    "leaky_relu_scalar": (lambda x, s: where(x > 0.0, x, x * s),
                          lambda x, s: __import__("torch").nn.functional.leaky_relu(x, s),
                          domain(0.01, 0.3)),
    "elu_scalar": (lambda x, s: where(x > 0.0, x, s * expm1(x)),
                   lambda x, s: __import__("torch").nn.functional.elu(x, alpha=s),
                   domain(0.5, 2.0)),
    "softplus_scalar": (lambda x, s: where(x * s > 20.0, x, log1p(exp(minimum(x * s, 20.0)))
                                           / s),
                        lambda x, s: __import__("torch").nn.functional.softplus(x, beta=s),
                        domain(0.5, 2.0)),
    "add_scalar_tensor": (lambda x, s: x + s, lambda x, s: x + s, domain(-2.0, 2.0)),
    "mul_scalar_tensor": (lambda x, s: x * s, lambda x, s: x * s, domain(-2.0, 2.0)),
    "pow_scalar_tensor": (lambda x, s: x ** s, lambda x, s: x ** s, domain(0.5, 3.0)),
    "clamp_min_scalar_tensor": (lambda x, s: maximum(x, s),
                                lambda x, s: x.clamp(min=s), domain(-1.0, 1.0)),
}


def parametric_op(name: str, fn):
    M, N = dims("M N")
    x = input("x", (M, N), "f32")
    s = scalar("s")
    i, j = axes("i j", M, N)
    return op(name, inputs=[x, s], outputs=[compute("y", (i, j), fn(x[i, j], s))])


def _parametric(name, fn, ref, dom):
    def reference(t, p):
        return ref(t["x"], float(t["s"]))
    reference.__qualname__ = f"{name}(x, s)"
    o = parametric_op(name, fn)
    doms = {"s": dom} | ({"x": domain(positive=True)} if name.startswith("pow") else {})
    return entry(o, reference, inputs=doms, edges=at_least(o, {}),
                 doc=f"{name}: a float argument s per call")


OPS.update({n: _parametric(n, *row) for n, row in PARAMETRIC.items()})
