"""The numba backend against the reference interpreter: every library op with its default
schedule at `small` and every edge shape, 3 seeds each, NaN-poisoned outputs, inputs
unchanged; a few non-default schedules at `small` (numba compiles take seconds each, so not
every variant at every shape: the CPU backend's tests cover those, and both backends print
the same loop tree); and a kernel refuses another shape class."""

from __future__ import annotations

import backend_checks as bc
import pytest

from kevolve import ops
from kevolve.backends.numba import NumbaBackend

BE = NumbaBackend()
pytestmark = pytest.mark.skipif(not BE.available()[0], reason=BE.available()[1])

VARIANTS = ("softmax_online", "layernorm_looped", "gemm_small_tiles", "gemm_bias_gelu_epilogue",
            "jagged_sum_split_segment", "jagged_softmax_looped")


@pytest.mark.parametrize("case", bc.default_cases(), ids=lambda c: c[0])
def test_default_schedule(case):
    _, name, shape = case
    problems = bc.check(BE, name, shape)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("case", bc.variant_cases(VARIANTS, only_small=True),
                         ids=lambda c: c[0])
def test_variant_schedule(case):
    _, name, expect, moves, shape = case
    d = ops.get(name)
    assert expect in bc.strategies(bc.plan_for(d.op_for(shape), d.dims(shape), moves, BE))
    problems = bc.check(BE, name, shape, moves)
    assert not problems, "\n".join(problems)


def test_kernel_refuses_another_shape_class():
    with pytest.raises(ValueError, match=r"y\.j: extent must fit one tile of 64 .*another "
                                         r"shape class"):
        bc.check(BE, "softmax", {"M": 6, "N": 50}, call_shape={"M": 6, "N": 100}, seeds=(0,))
