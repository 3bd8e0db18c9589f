"""Schedule mutations the heuristic proposer draws from: each returns a trace that still
applies and lowers, or None where it does not apply."""

from __future__ import annotations

import random

from kevolve import ops
from kevolve.agent.proposers import mutations as mu
from kevolve.schedule import Trace, apply_trace, default_trace, lower


def test_static_dims_are_inner_extents_of_multi_dim_inputs():
    assert mu.static_dims(ops.get("dot_interaction").op) == ["D", "F"]
    assert mu.static_dims(ops.get("gemm_bias_gelu").op) == ["K", "N"]
    # a jagged op's total length and its longest segment change from batch to batch
    assert mu.static_dims(ops.get("jagged_sum").op) == ["D"]


def test_toggle_constexpr_adds_and_removes_a_dim():
    d = ops.get("dot_interaction")
    op, dims = d.op_for("gpu"), d.dims("gpu")
    t = default_trace(op, dims)
    rng = random.Random(3)
    assert mu.toggle_constexpr(t, rng, False, op) is None  # CPU backends: nothing to do
    seen = set()
    cur = t
    for _ in range(12):
        cur = mu.toggle_constexpr(cur, rng, True, op)
        plan = lower(apply_trace(op, cur), dims)
        cx = plan.kernels[0].constexpr_dims
        assert set(cx) <= {"D", "F"}
        seen.add(cx)
    assert {(), ("D",), ("F",), ("D", "F")} & seen >= {("D",), ("F",)}
    assert Trace.from_json(cur.to_json()) == cur
