"""The unary math of the IR beyond exp/log/...: sin, cos, floor, ceil, trunc, round_ (half to
even, as torch.round), log1p, expm1 — the interpreter against torch, and every CPU-runnable
backend (cpu, numba, mtia, Triton's interpreter) against the interpreter, on inputs that
include exact ties (k + 0.5), negative values and integers, at awkward sizes."""

from __future__ import annotations

import numpy as np
import opcheck
import pytest
import torch

from kevolve.backends.registry import get
from kevolve.ir import builder as kb
from kevolve.ir.interp import run

FNS = {"sin": torch.sin, "cos": torch.cos, "floor": torch.floor, "ceil": torch.ceil,
       "trunc": torch.trunc, "round_": torch.round, "log1p": torch.log1p,
       "expm1": torch.expm1}


def unary(name: str):
    M, N = kb.dims("M N")
    x = kb.input("x", (M, N), kb.f32)
    i, j = kb.axes("i j", M, N)
    return kb.op(name.rstrip("_"), inputs=[x], outputs=[
        kb.compute("y", (i, j), getattr(kb, name)(x[i, j]))])


def values(rng, shape, name):
    """Half-integers (ties for round), integers and random reals, all signs."""
    n = int(np.prod(shape))
    base = np.concatenate([np.arange(-4, 4) + 0.5, np.arange(-3.0, 4.0),
                           rng.uniform(-6, 6, size=max(n, 1))])[:n]
    if name == "log1p":
        base = np.abs(base) - 0.5 * (np.abs(base) > 0.9)
    return rng.permutation(base).reshape(shape).astype(np.float32)


@pytest.mark.parametrize("name", list(FNS))
def test_interpreter_matches_torch(name):
    rng = np.random.default_rng(3)
    x = values(rng, (7, 11), name)
    got = run(unary(name), {"x": x})["y"]
    want = FNS[name](torch.from_numpy(x).double()).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_round_is_half_to_even():
    x = np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5]], dtype=np.float32)
    assert run(unary("round_"), {"x": x})["y"].tolist() == [[-2, -2, -0, 0, 2, 2]]


@pytest.mark.parametrize("backend", ["cpu", "numba", "mtia", "triton"])
@pytest.mark.parametrize("name", list(FNS))
@pytest.mark.parametrize("dims", [{"M": 1, "N": 1}, {"M": 5, "N": 13}])
def test_backend_matches_interpreter(backend, name, dims):
    be = get(backend, interpret=True) if backend == "triton" else get(backend)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    shape = (dims["M"], dims["N"])
    assert not opcheck.check(unary(name), dims, be,
                             make=lambda rng: {"x": values(rng, shape, name)})
