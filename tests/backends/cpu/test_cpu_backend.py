"""The CPU backend (C/OpenMP built by the system compiler) against the reference
interpreter: every library op with its default schedule at `small` and every edge shape,
a non-default schedule per op family, 3 seeds each, NaN-poisoned outputs, inputs unchanged.
Also: the checks themselves catch wrong kernels, a kernel refuses another shape class, and a
compiler error surfaces as CompileError."""

from __future__ import annotations

import backend_checks as bc
import numpy as np
import pytest

from kevolve import ops
from kevolve.backends.base import Backend, Kernel, KernelSource
from kevolve.backends.cpu import CFLAGS, CpuBackend
from kevolve.errors import CompileError
from kevolve.ir.interp import run as reference

BE = CpuBackend()
pytestmark = pytest.mark.skipif(not BE.available()[0], reason=BE.available()[1])


@pytest.mark.parametrize("case", bc.default_cases(), ids=lambda c: c[0])
def test_default_schedule(case):
    _, name, shape = case
    problems = bc.check(BE, name, shape)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("case", bc.variant_cases(), ids=lambda c: c[0])
def test_variant_schedule(case):
    _, name, expect, moves, shape = case
    d = ops.resolve(name)
    plan = bc.plan_for(d.op_for(shape), d.dims(shape), moves, BE)
    assert expect in bc.strategies(plan)
    problems = bc.check(BE, name, shape, moves)
    assert not problems, "\n".join(problems)


def test_kernel_refuses_another_shape_class():
    """Lowered at N=50 (one tile of 64), called at N=100: the launch guard names itself."""
    with pytest.raises(ValueError, match=r"y\.j: extent must fit one tile of 64 .*another "
                                         r"shape class"):
        bc.check(BE, "softmax", {"M": 6, "N": 50}, call_shape={"M": 6, "N": 100}, seeds=(0,))


def test_compile_error_surfaces_with_the_compilers_message():
    text = "int kv_launch(void **bufs, const long *dims) { return undeclared_thing + ; }\n"
    src = KernelSource("cpu", "broken", "c", text, "kv_launch", CFLAGS)
    with pytest.raises(CompileError, match="error"):
        BE.build(src)


class _Faulty(Backend):
    """Runs the reference, then does one thing wrong (or nothing, for "exact")."""

    name = "faulty"

    def __init__(self, fault: str):
        self.fault = fault

    def render(self, plan):
        return KernelSource(self.name, plan.op.name, "python", "", "", meta={"plan": plan})

    def build(self, source):
        op = source.meta["plan"].op

        def run(inputs, outputs, params):
            ref = reference(op, inputs, params)
            for n, v in ref.items():
                outputs[n][...] = v
            first = next(iter(op.outputs))
            flat = outputs[first].reshape(-1)
            if self.fault == "nan":
                flat[np.flatnonzero(~np.isnan(ref[first].reshape(-1)))[-1]] = np.nan
            elif self.fault == "off":  # ten times the dtype's tolerance
                rtol, atol = bc.TOL[op.stage(first).out.dtype.name]
                scale = max(1.0, float(np.nanmax(np.abs(ref[first]))))
                flat[0] = flat[0] * (1 + 10 * rtol) + 10 * atol * scale
            elif self.fault == "input":
                inputs[op.inputs[0].name].reshape(-1)[0] += 1
        return Kernel(source, run)


@pytest.mark.parametrize("name", ["softmax", "jagged_softmax", "gemm_bias_gelu"])
def test_checks_catch_wrong_kernels(name):
    shape = ops.get(name).shape("small")
    assert bc.check(_Faulty("exact"), name, shape) == []
    assert any("NaN" in p for p in bc.check(_Faulty("nan"), name, shape))
    assert any("elements off" in p for p in bc.check(_Faulty("off"), name, shape))
    assert any("was modified" in p for p in bc.check(_Faulty("input"), name, shape))


def test_one_kernel_called_on_changing_jagged_totals_and_then_a_wrong_shape():
    """The launch remembers dims per input shapes: every new total is solved afresh, a
    repeated one reuses its dims, and an inconsistent call is still refused."""
    from kevolve import api
    from kevolve.ir.interp import InterpError

    d = ops.resolve("jagged_sum")
    k = api.build(api.lower(d.op, None, BE, {"B": 3, "D": 5, "T": 9, "max_len": 8}), BE)
    rng = np.random.default_rng(7)
    for lengths in ([4, 0, 5], [1, 8, 2], [4, 0, 5], [0, 0, 0]):
        off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        ins = {"values": rng.standard_normal((int(off[-1]), 5)).astype(np.float32),
               "offsets": off}
        out = {"out": np.full((3, 5), np.nan, np.float32)}
        k(ins, out, {"max_len": 8})
        np.testing.assert_allclose(out["out"], reference(d.op, ins, {"max_len": 8})["out"],
                                   rtol=1e-5, atol=1e-5)
    with pytest.raises(InterpError, match="'values' should have 2 dims"):
        k({"values": np.zeros(9, np.float32), "offsets": np.zeros(4, np.int64)},
          {"out": np.zeros((3, 5), np.float32)}, {"max_len": 8})
