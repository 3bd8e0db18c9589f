"""scalar(): a float value fixed per call (a slope, a scale) without a 1-element buffer. It
is a 0-d input: the interpreter reads it, the shape dict may fix it, inputs keep it 0-d on
the way to torch and to kernels, and every CPU-runnable backend computes with it."""

from __future__ import annotations

import numpy as np
import pytest

from kevolve.backends.registry import get
from kevolve.evaluate.conform import conform
from kevolve.ir.builder import axes, compute, dims, f32, input, op, scalar, where
from kevolve.ir.interp import run
from kevolve.ir.printer import op_text
from kevolve.ops import define, domain, resolve


def leaky():
    M, N = dims("M N")
    x = input("x", (M, N), f32)
    s = scalar("slope")
    i, j = axes("i j", M, N)
    return op("leaky", inputs=[x, s], outputs=[
        compute("y", (i, j), where(x[i, j] > 0.0, x[i, j], x[i, j] * s))])


def test_a_scalar_is_a_0d_input():
    o = leaky()
    assert [(b.name, b.shape) for b in o.inputs] == [("x", o.inputs[0].shape), ("slope", ())]
    assert "x[i, j] * slope" in op_text(o)
    x = np.array([[-2.0, 3.0]], dtype=np.float32)
    y = run(o, {"x": x, "slope": np.float32(0.25)})["y"]
    assert y.tolist() == [[-0.5, 3.0]]


def test_shape_dict_fixes_the_value_and_inputs_stay_0d():
    d = define(leaky(), inputs={"slope": domain(0.01, 0.3)},
               reference=lambda t, p: __import__("torch").nn.functional.leaky_relu(
                   t["x"], float(t["slope"])))
    c = d.case({"M": 3, "N": 4, "slope": 0.125}, 0)
    assert c.inputs["slope"].shape == () and float(c.inputs["slope"]) == 0.125
    drawn = float(d.case("small", 1).inputs["slope"])
    assert 0.01 <= drawn <= 0.3
    assert conform(d, seeds=(0, 1)).ok


@pytest.mark.parametrize("backend", ["cpu", "numba", "mtia", "triton"])
def test_backends_compute_with_a_scalar(backend):
    be = get(backend, interpret=True) if backend == "triton" else get(backend)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    for name in ("leaky_relu_scalar", "pow_scalar_tensor"):
        r = conform(resolve(f"aten.{name}"), be, seeds=(0, 1), backend_name=backend)
        assert r.ok, f"{name}: {r.verdict} at {r.stage}: {r.reason}"
