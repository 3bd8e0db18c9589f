"""The cache moves, carried onto the plan: each step lists the (buffer, scope) pairs its
stage asked for, so a backend's render (a pure function of the plan) can stage them.

A pass after lowering proper, because only there are the steps final: an online sum that
absorbed its max stage carries the max stage's caches too (it computes both)."""

from __future__ import annotations

from dataclasses import replace

from .lower import lower as lower_steps
from .plan import Plan
from .state import Schedule


def attach_caches(sched: Schedule, plan: Plan) -> Plan:
    """`plan` with every step's `caches` set from its stage (and a folded max stage)."""
    if not any(s.caches for s in sched.stages):
        return plan
    kernels = []
    for k in plan.kernels:
        steps = []
        for st in k.steps:
            caches = sched.stage(st.stage.name).caches
            if st.online_max:
                caches += tuple(c for c in sched.stage(st.online_max).caches
                                if c[0] not in {b for b, _ in caches})
            steps.append(replace(st, caches=caches) if caches else st)
        kernels.append(replace(k, steps=tuple(steps)))
    return replace(plan, kernels=tuple(kernels))


def lower(sched: Schedule, dims: dict[str, int]) -> Plan:
    """Lower `sched` for the shape class `dims` (see lower.py), caches attached."""
    return attach_caches(sched, lower_steps(sched, dims))
