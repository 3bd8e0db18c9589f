"""Bool and int8 buffers on every backend: a mask read as a where() condition inside a
prefix sum and as 0/1 in arithmetic, a comparison stored as bool, int8 values dequantized
by a per-column scale, and an int8 output that holds a clamped quantization. Sizes 1, a
prime and a non-multiple of every tile; values checked exactly (bool, int8) or to f32
rounding against the reference interpreter, which agrees with torch. The cpu backend takes
f16 buffers too (C's _Float16)."""

from __future__ import annotations

import numpy as np
import opcheck
import pytest
import torch

from kevolve.backends.registry import get
from kevolve.ir.builder import (
    axes,
    bool_,
    cast,
    compute,
    dims,
    f32,
    i8,
    input,
    maximum,
    minimum,
    op,
    reduce_axis,
    round_,
    sum_,
    where,
)
from kevolve.ir.errors import SpecError
from kevolve.ir.interp import run


def masks():
    M, N = dims("M N")
    x, mask = input("x", (M, N), f32), input("mask", (M, N), bool_)
    q, s = input("q", (M, N), i8), input("s", (N,), f32)
    i, j = axes("i j", M, N)
    k = reduce_axis("k", j + 1, max_extent=N)
    return op("masks", inputs=[x, mask, q, s], outputs=[
        compute("cum", (i, j), sum_(where(mask[i, k], x[i, k], 0.0), over=k)),
        compute("gt", (i, j), x[i, j] > cast(q[i, j], f32)),
        compute("deq", (i, j), cast(q[i, j], f32) * s[j]),
        compute("masked", (i, j), x[i, j] * mask[i, j] + (s[j] > 1.0)),
        compute("quant", (i, j), cast(minimum(maximum(round_(x[i, j] * 40.0), -128.0), 127.0),
                                      i8))])


def inputs(rng, m: int, n: int) -> dict:
    return {"x": rng.standard_normal((m, n)).astype(np.float32),
            "mask": rng.integers(0, 2, size=(m, n)).astype(bool),
            "q": rng.integers(-128, 128, size=(m, n)).astype(np.int8),
            "s": rng.uniform(0.5, 2.0, size=n).astype(np.float32)}


def test_the_interpreter_agrees_with_torch():
    h = inputs(np.random.default_rng(0), 3, 17)
    got = run(masks(), h)
    t = {k: torch.from_numpy(v) for k, v in h.items()}
    torch.testing.assert_close(torch.from_numpy(got["cum"]).float(),
                               (t["x"] * t["mask"]).cumsum(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.from_numpy(got["masked"]).float(),
                               t["x"] * t["mask"] + (t["s"] > 1.0))
    assert got["gt"].dtype == bool
    assert got["gt"].tolist() == (t["x"] > t["q"].float()).tolist()
    assert got["quant"].tolist() == (t["x"] * 40).round().clamp(-128, 127).to(torch.int8) \
        .tolist()


def test_a_buffer_names_the_dtypes_it_can_hold():
    with pytest.raises(SpecError, match="i8.*bool"):
        input("x", (4,), f32.__class__("f8", 8, "float"))


@pytest.mark.parametrize("name", opcheck.BACKENDS)
@pytest.mark.parametrize("m,n", [(1, 1), (3, 13), (2, 257)])
def test_bool_and_int8_buffers(name, m, n):
    make = lambda rng: inputs(rng, m, n)  # noqa: E731
    assert not opcheck.check_on(name, masks(), {"M": m, "N": n}, make=make)


@pytest.mark.parametrize("name", ["cuda", "hip"])
def test_gpu_compilers_take_bool_and_int8_buffers(name):
    opcheck.gpu_compile(name, masks(), {"M": 3, "N": 257})


def half_norm():
    """An f16 row normalization with f32 statistics: the cpu backend's _Float16 buffers."""
    from kevolve.ir.builder import f16, rsqrt

    M, N = dims("M N")
    x = input("x", (M, N), f16)
    i, j = axes("i j", M, N)
    k = reduce_axis("k", N)
    ms = compute("ms", (i,), sum_(cast(x[i, k], f32) * cast(x[i, k], f32), over=k)
                 / cast(N, f32))
    return op("half_norm", inputs=[x], outputs=[
        compute("y", (i, j), cast(x[i, j], f32) * rsqrt(ms[i] + 1e-5), dtype=f16)])


@pytest.mark.parametrize("m,n", [(1, 1), (3, 13), (2, 257)])
def test_cpu_takes_f16_buffers(m, n):
    make = lambda rng: {"x": rng.standard_normal((m, n)).astype(np.float16)}  # noqa: E731
    assert not opcheck.check(half_norm(), {"M": m, "N": n}, get("cpu"), make=make)
