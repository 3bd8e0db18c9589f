"""prod_: a product reduction (over dense axes, a dependent axis, a jagged segment). The
interpreter against torch (an empty product is 1, as torch.prod), and every backend against
the interpreter: cpu, numba, mtia, Triton's interpreter (tl.reduce with a product combine),
and the CUDA and HIP emulations, at awkward sizes, on signed inputs."""

from __future__ import annotations

import numpy as np
import opcheck
import pytest
import torch

from kevolve.backends.registry import get
from kevolve.ir.builder import (
    axes,
    compute,
    dims,
    f32,
    i64,
    input,
    jagged_axis,
    op,
    param,
    prod_,
    reduce_axis,
)
from kevolve.ir.interp import run


def row_prod():
    M, N = dims("M N")
    x = input("x", (M, N), f32)
    (i,) = axes("i", M)
    k = reduce_axis("k", N)
    return op("row_prod", inputs=[x], outputs=[compute("y", (i,), prod_(x[i, k], over=k))])


def segment_prod():
    T, B, D = dims("T B D")
    v = input("values", (T, D), f32)
    off = input("offsets", (B + 1,), i64)
    b, d = axes("b d", B, D)
    l_ = jagged_axis("l", start=off[b], end=off[b + 1], max_extent=param("max_len"),
                     reduce=True)
    return op("segment_prod", inputs=[v, off], outputs=[
        compute("out", (b, d), prod_(v[l_, d], over=l_))])


def test_interpreter_matches_torch_and_empty_is_one():
    x = np.random.default_rng(0).uniform(-1.5, 1.5, size=(4, 7)).astype(np.float32)
    got = run(row_prod(), {"x": x})["y"]
    np.testing.assert_allclose(got, torch.from_numpy(x).double().prod(-1).numpy(), rtol=1e-12)
    assert run(row_prod(), {"x": np.zeros((3, 0), np.float32)})["y"].tolist() == [1, 1, 1]
    v = np.array([[2.0], [3.0], [-1.0]], np.float32)
    out = run(segment_prod(), {"values": v, "offsets": np.array([0, 2, 2, 3])},
              {"max_len": 2})["out"]
    assert out.ravel().tolist() == [6.0, 1.0, -1.0]


BACKENDS = ["cpu", "numba", "mtia", "triton", "cuda", "hip"]


def backend(name):
    be = get(name, interpret=True) if name == "triton" else \
        get(name, emulate=True) if name in ("cuda", "hip") else get(name)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    return be


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("dims", [{"M": 1, "N": 1}, {"M": 5, "N": 13}, {"M": 3, "N": 301}])
def test_row_product(name, dims):
    shape = (dims["M"], dims["N"])
    make = lambda rng: {"x": rng.uniform(0.8, 1.25, size=shape).astype(np.float32)  # noqa: E731
                        * rng.choice([-1.0, 1.0], size=shape).astype(np.float32)}
    assert not opcheck.check(row_prod(), dims, backend(name), make=make)


@pytest.mark.parametrize("name", BACKENDS)
def test_segment_product(name):
    assert not opcheck.check(segment_prod(), {"B": 6, "D": 3, "T": 24}, backend(name),
                             params={"max_len": 4})
