"""Integer reductions accumulate in int64 on every backend, exact past 2^24 (in f32 a row of
values near 2^30 summed to the wrong integer): a row sum and a row max (a block's lanes
combined through shuffles and shared memory on GPUs), a column sum, a full sum to a scalar
(split across programs), a running sum (a scan), a count, and a contraction (a Gram
matrix: no matrix unit, whose accumulators are floats). Values are checked exactly
against the reference interpreter, which reduces integers in int64."""

from __future__ import annotations

import numpy as np
import opcheck
import pytest

from kevolve.ir.builder import (
    axes,
    axis,
    compute,
    dims,
    i64,
    input,
    max_,
    min_,
    op,
    reduce_axis,
    sum_,
    where,
)
from kevolve.ir.interp import run


def int_reductions():
    M, N = dims("M N")
    a, s = input("a", (M, N), i64), input("s", (M, N), i64)
    i, j = axes("i j", M, N)
    i2 = axis("i2", M)
    k, r = reduce_axis("k", N), reduce_axis("r", M)
    k2, r2 = reduce_axis("k2", N), reduce_axis("r2", M)
    p = axis("p", j + 1, max_extent=N, reduce=True)
    return op("int_reductions", inputs=[a, s], outputs=[
        compute("gram", (i, i2), sum_(s[i, k] * s[i2, k], over=k)),
        compute("rows", (i,), sum_(a[i, k], over=k)),
        compute("rmax", (i,), max_(a[i, k] - 3000000000, over=k)),
        compute("cols", (j,), min_(a[r, j] * 3, over=r)),
        compute("total", (), sum_(a[r2, k2], over=(r2, k2))),
        compute("run", (i, j), sum_(a[i, p], over=p)),
        compute("big", (i,), sum_(where(a[i, k] > 1500000000, 1, 0), over=k), dtype=i64)])


def inputs(rng, m: int, n: int) -> dict:
    return {"a": rng.integers(1 << 30, 1 << 31, size=(m, n)).astype(np.int64),
            "s": rng.integers(-(1 << 20), 1 << 20, size=(m, n)).astype(np.int64)}


def test_the_interpreter_is_exact():
    h = inputs(np.random.default_rng(0), 3, 17)
    got = run(int_reductions(), h)
    assert got["rows"].tolist() == h["a"].sum(1).tolist()
    assert int(got["total"]) == int(h["a"].sum())
    assert got["run"].tolist() == np.cumsum(h["a"], 1).tolist()
    assert got["gram"].tolist() == (h["s"] @ h["s"].T).tolist()


@pytest.mark.parametrize("name", opcheck.BACKENDS)
@pytest.mark.parametrize("m,n", [(1, 1), (3, 13), (5, 1031)])
def test_integer_reductions_are_exact(name, m, n):
    make = lambda rng: inputs(rng, m, n)  # noqa: E731
    assert not opcheck.check_on(name, int_reductions(), {"M": m, "N": n}, make=make)


@pytest.mark.parametrize("name", ["cuda", "hip"])
def test_gpu_compilers_take_integer_accumulators(name):
    opcheck.gpu_compile(name, int_reductions(), {"M": 5, "N": 1031})
