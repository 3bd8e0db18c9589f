"""`//` and `%` round as the IR, numpy and torch define them (the quotient toward -inf, the
remainder with the divisor's sign; `/` of two integers is `//`) on every backend, where C
and Triton truncate toward zero: integer values of both signs over positive and negative
divisors, a divisor read from a buffer, and floats (which C's `%` refuses and `/` alone
does not floor). Index arithmetic whose sides cannot be negative keeps the plain
operators."""

from __future__ import annotations

import numpy as np
import opcheck
import pytest
import torch

from kevolve.backends.pyexpr import _nonneg
from kevolve.backends.registry import get
from kevolve.ir.builder import axes, compute, dims, f32, i64, input, op
from kevolve.ir.interp import run
from kevolve.ir.nodes import AxisRef, Binary, Const


def int_division():
    N = dims("N")
    h, d = input("h", (N,), i64), input("d", (N,), i64)
    (n,) = axes("n", N)
    # past 2^24: kept between stages of one kernel as an integer, not a float
    big = compute("big", (n,), h[n] * 1000003 + d[n], dtype=i64)
    return op("int_division", inputs=[h, d], outputs=[
        compute("q3", (n,), h[n] // 3, dtype=i64), compute("r3", (n,), h[n] % 3, dtype=i64),
        compute("qm2", (n,), h[n] // -2, dtype=i64), compute("rm2", (n,), h[n] % -2, dtype=i64),
        compute("qd", (n,), h[n] // d[n], dtype=i64), compute("rd", (n,), h[n] % d[n], dtype=i64),
        compute("qt", (n,), h[n] / d[n], dtype=i64), big, compute("bq", (n,), big[n] // 7)])


def float_division():
    N = dims("N")
    x = input("x", (N,), f32)
    (n,) = axes("n", N)
    return op("float_division", inputs=[x], outputs=[
        compute("q", (n,), x[n] // 0.75), compute("r", (n,), x[n] % 0.75),
        compute("qm", (n,), x[n] // -0.5), compute("rm", (n,), x[n] % -0.5)])


def ints(rng, n: int) -> dict:
    d = rng.integers(1, 5, size=n) * rng.choice([-1, 1], size=n)  # never 0
    return {"h": rng.integers(-50, 51, size=n).astype(np.int64), "d": d.astype(np.int64)}


def floats(rng, n: int) -> dict:
    return {"x": (rng.uniform(-6, 6, size=n) * 8).round() / 8}  # exact, some multiples


def test_the_interpreter_floors_like_torch():
    rng = np.random.default_rng(0)
    h = ints(rng, 97)
    got = run(int_division(), h)
    th, td = torch.from_numpy(h["h"]), torch.from_numpy(h["d"])
    assert got["q3"].tolist() == torch.div(th, 3, rounding_mode="floor").tolist()
    assert got["rm2"].tolist() == torch.remainder(th, -2).tolist()
    assert got["qd"].tolist() == torch.div(th, td, rounding_mode="floor").tolist()
    assert got["rd"].tolist() == torch.remainder(th, td).tolist()
    assert got["qt"].tolist() == got["qd"].tolist()  # `/` of integers is `//`
    assert got["bq"].tolist() == torch.div(th * 1000003 + td, 7, rounding_mode="floor").tolist()
    x = floats(rng, 97)["x"].astype(np.float32)
    got = run(float_division(), {"x": x})
    np.testing.assert_allclose(got["r"], torch.remainder(torch.from_numpy(x), 0.75).numpy(),
                               atol=1e-6)


BACKENDS = ["cpu", "numba", "mtia", "triton", "cuda", "hip"]


def backend(name):
    be = get(name, emulate=True) if name in ("cuda", "hip") else get(name)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    return be


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("n", [1, 13, 257])
def test_integer_division_floors(name, n):
    make = lambda rng: ints(rng, n)  # noqa: E731
    if name == "triton":
        assert not opcheck.check_interpreted(int_division(), {"N": n}, make=make)
        return
    assert not opcheck.check(int_division(), {"N": n}, backend(name), make=make)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("n", [1, 13, 257])
def test_float_division_floors(name, n):
    make = lambda rng: {"x": floats(rng, n)["x"].astype(np.float32)}  # noqa: E731
    if name == "triton":
        assert not opcheck.check_interpreted(float_division(), {"N": n}, make=make)
        return
    assert not opcheck.check(float_division(), {"N": n}, backend(name), make=make)


def strided_window():
    """An output extent `(N - K) // 2 + 1` (a strided pool): its guards and grid are host
    code, where the launcher's Python floors natively (tl.where outside a jit function
    raised at launch)."""
    from kevolve.ir.builder import max_, reduce_axis

    N, K = dims("N K")
    x = input("x", (N,), f32)
    (o,) = axes("o", (N - K) // 2 + 1)
    t = reduce_axis("t", K)
    return op("strided_window", inputs=[x], outputs=[
        compute("y", (o,), max_(x[o * 2 + t], over=t))])


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("n", [3, 13, 258])
def test_strided_window_extent(name, n):
    if name == "triton":
        assert not opcheck.check_interpreted(strided_window(), {"N": n}, {"K": 3})
        return
    assert not opcheck.check(strided_window(), {"N": n}, backend(name), params={"K": 3})


def test_index_arithmetic_keeps_plain_operators():
    from kevolve.ir.builder import axis

    i = axis("i", 8)
    assert _nonneg(Binary("floordiv", Binary("add", AxisRef(i), Const(3)), Const(2)))
    assert not _nonneg(Binary("sub", AxisRef(i), Const(1)))
    tri = Binary("mul", AxisRef(i), Binary("sub", AxisRef(i), Const(1)))
    assert _nonneg(tri) and not _nonneg(Binary("mul", AxisRef(i), Binary("sub", AxisRef(i),
                                                                         Const(2))))
    assert not _nonneg(Const(-2))
