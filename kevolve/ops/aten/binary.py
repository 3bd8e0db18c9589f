"""Pointwise binary and ternary operators over [M, N] operands (a row vector b[N] where the
name says broadcast): arithmetic, powers, the log-space and distance forms, lerp/addcmul/
addcdiv. One table row per operator; f32, bf16 and f16 variants (math in f32)."""

from __future__ import annotations

import math

from ...ir.builder import (
    abs_,
    axes,
    compute,
    dims,
    eq,
    exp,
    floor,
    input,
    log,
    log1p,
    maximum,
    minimum,
    op,
    sqrt,
    trunc,
    where,
)
from ..spec import domain
from ._entry import HALF, at_least, entry, f, with_half

_POS = domain(0.2, 3.0)
_NZ = domain(nonzero=True)


def _logaddexp(a, b):
    m = maximum(a, b)
    return m + log1p(exp(-abs_(a - b)))


# name -> (formula of f32 operands (x, y), torch reference, {input: domain})
BINARY: dict[str, tuple] = {
    "add": (lambda x, y: x + y, "torch.add", {}),
    "sub": (lambda x, y: x - y, "torch.sub", {}),
    "rsub": (lambda x, y: y - x, "torch.rsub", {}),
    "mul": (lambda x, y: x * y, "torch.mul", {}),
    "div": (lambda x, y: x / y, "torch.div", {"y": _NZ}),
    "true_divide": (lambda x, y: x / y, "torch.true_divide", {"y": _NZ}),
    "floor_divide": (lambda x, y: floor(x / y), "torch.floor_divide",
                     {"x": domain(-20.0, 20.0, integer=True), "y": domain(1.0, 4.0, integer=True)}),
    "fmod": (lambda x, y: x - trunc(x / y) * y, "torch.fmod",
             {"x": domain(-20.0, 20.0, integer=True), "y": domain(1.0, 4.0, integer=True)}),
    "remainder": (lambda x, y: x - floor(x / y) * y, "torch.remainder",
                  {"x": domain(-20.0, 20.0, integer=True), "y": domain(1.0, 4.0, integer=True)}),
    "maximum": (maximum, "torch.maximum", {}),
    "minimum": (minimum, "torch.minimum", {}),
    "fmax": (maximum, "torch.fmax", {}),
    "fmin": (minimum, "torch.fmin", {}),
    "pow": (lambda x, y: x ** y, "torch.pow", {"x": _POS, "y": domain(-2.0, 2.0)}),
    "float_power": (lambda x, y: exp(y * log(x)), "torch.float_power",
                    {"x": _POS, "y": domain(-2.0, 2.0)}),
    "hypot": (lambda x, y: sqrt(x * x + y * y), "torch.hypot", {}),
    "xlogy": (lambda x, y: where(eq(x, 0.0), 0.0, x * log(y)), "torch.xlogy", {"y": _POS}),
    "copysign": (lambda x, y: where(y < 0.0, -abs_(x), abs_(x)), "torch.copysign", {}),
    "logaddexp": (_logaddexp, "torch.logaddexp", {}),
    "logaddexp2": (lambda x, y: _logaddexp(x * math.log(2.0), y * math.log(2.0))
                   * (1.0 / math.log(2.0)), "torch.logaddexp2", {}),
    "squared_difference": (lambda x, y: (x - y) * (x - y),
                           lambda t, p: (t["x"] - t["y"]) ** 2, {}),
    "heaviside": (lambda x, y: where(eq(x, 0.0), y, where(x > 0.0, 1.0, 0.0)),
                  "torch.heaviside", {"x": domain(-2.0, 2.0, integer=True)}),
    "add_alpha": (lambda x, y: x + y * 0.5, "torch.add(alpha=0.5)", {}),
    "sub_alpha": (lambda x, y: x - y * 2.0, "torch.sub(alpha=2.0)", {}),
    "silu_mul": (lambda x, y: x / (1.0 + exp(-x)) * y,
                 lambda t, p: __import__("torch").nn.functional.silu(t["x"]) * t["y"], {}),
}

# name -> (formula of (x, a, b), torch reference, {input: domain})
TERNARY: dict[str, tuple] = {
    "lerp": (lambda x, a, w: x + w * (a - x), "torch.lerp", {}),
    "addcmul": (lambda x, a, b: x + 0.5 * a * b, "torch.addcmul(value=0.5)", {}),
    "addcdiv": (lambda x, a, b: x + 0.5 * a / b, "torch.addcdiv(value=0.5)", {"b": _NZ}),
    "clamp_tensor": (lambda x, a, b: minimum(maximum(x, a), b), "torch.clamp",
                     {"a": domain(-1.0, -0.1), "b": domain(0.1, 1.0)}),
}
_TERNARY_NAMES = {"lerp": "x a w", "addcmul": "x a b", "addcdiv": "x a b",
                  "clamp_tensor": "x a b"}


def binary_op(name: str, fn, dtype: str = "f32", broadcast: bool = False):
    M, N = dims("M N")
    x = input("x", (M, N), dtype)
    y = input("y", (N,) if broadcast else (M, N), dtype)
    i, j = axes("i j", M, N)
    yy = y[j] if broadcast else y[i, j]
    return op(name, inputs=[x, y],
              outputs=[compute("out", (i, j), fn(f(x[i, j]), f(yy)), dtype=dtype)])


def ternary_op(name: str, fn, names: str, dtype: str = "f32"):
    M, N = dims("M N")
    bufs = [input(n, (M, N), dtype) for n in names.split()]
    i, j = axes("i j", M, N)
    return op(name, inputs=bufs, outputs=[
        compute("out", (i, j), fn(*(f(b[i, j]) for b in bufs)), dtype=dtype)])


def _variants(make):
    v = {d: make(d) for d in ("f32",) + HALF}
    return v, with_half(at_least(v["f32"], {}))


def _binary(name, fn, ref, doms, broadcast=False):
    v, edges = _variants(lambda d: binary_op(name, fn, d, broadcast))
    return entry(v, ref, inputs=doms or None, edges=edges)


def _ternary(name, fn, ref, doms):
    v, edges = _variants(lambda d: ternary_op(name, fn, _TERNARY_NAMES[name], d))
    return entry(v, ref, inputs=doms or None, edges=edges)


OPS = {n: _binary(n, *row) for n, row in BINARY.items()}
for _n in ("add", "mul", "sub", "div", "maximum"):
    fn, ref, doms = BINARY[_n]
    OPS[f"{_n}_broadcast"] = _binary(f"{_n}_broadcast", fn, ref, doms, broadcast=True)
OPS.update({n: _ternary(n, *row) for n, row in TERNARY.items()})
