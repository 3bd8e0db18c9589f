"""Replaying a trace gives the same plan: for every library op at its small preset (and its
edge shapes), the default trace applies and lowers, deterministically, and survives JSON."""

from __future__ import annotations

import pytest
from schedlib import ALL, LIBRARY, check_plan_shape, small

from kevolve import ops
from kevolve.ir.interp import bind_dims
from kevolve.plan import lower
from kevolve.schedule import Trace, apply_trace, default_trace


def test_the_library_is_all_here():
    assert len(LIBRARY) >= 15 and "softmax" in LIBRARY and "gemm_bias_gelu" in LIBRARY


@pytest.mark.parametrize("name", ALL)
def test_default_trace_replays_to_the_same_plan(name):
    op, dims = small(name)
    trace = default_trace(op, dims)
    assert trace.op == op.name
    assert default_trace(op, dims) == trace  # the default itself is a pure function
    s1, s2 = apply_trace(op, trace), apply_trace(op, trace)
    assert s1 == s2
    p1, p2 = lower(s1, dims), lower(s2, dims)
    assert p1 == p2
    assert p1.dims_dict == dims
    again = Trace.from_json(trace.to_json())
    assert again == trace and again.hash == trace.hash
    assert lower(apply_trace(op, again), dims) == p1
    check_plan_shape(p1)


@pytest.mark.parametrize("name", LIBRARY)
def test_default_trace_lowers_for_every_edge_shape(name):
    d = ops.get(name)
    for shape in d.edge_shapes:
        case = d.case(shape)
        op = d.op_for(shape)
        dims = bind_dims(op, case.inputs, case.params)
        plan = lower(apply_trace(op, default_trace(op, dims)), dims)
        check_plan_shape(plan)


@pytest.mark.parametrize("name", ALL)
def test_default_trace_without_dims_applies(name):
    """Without a shape class the default is still a legal schedule (no size-based splits)."""
    op, dims = small(name)
    trace = default_trace(op)
    check_plan_shape(lower(apply_trace(op, trace), dims))


def test_a_plan_is_per_shape_class():
    op, _ = small("softmax")
    trace = default_trace(op)
    a = lower(apply_trace(op, trace), {"M": 4, "N": 100})
    b = lower(apply_trace(op, trace), {"M": 4, "N": 3000})
    assert a != b and a.dims_dict == {"M": 4, "N": 100}
    assert [lp.size for lp in a.kernels[0].loops if lp.role == "block"] == [128]
    assert [lp.size for lp in b.kernels[0].loops if lp.role == "block"] == [4096]
