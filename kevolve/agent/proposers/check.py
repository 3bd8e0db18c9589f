"""What every proposer proves about a trace before it reaches a worker."""

from __future__ import annotations

from ...backends.resources import check_fits
from ...schedule import Trace, apply_trace, lower
from ...schedule.plan import Plan


class Backends:
    """Registry backends by name, each made once per proposer, for `prove`; None for a
    name the registry does not know (a context built for a test), which skips the
    backend's checks."""

    def __init__(self):
        self._made: dict = {}

    def __call__(self, name: str):
        if name not in self._made:
            from ...backends.registry import UnknownBackend, get
            try:
                self._made[name] = get(name)
            except UnknownBackend:
                self._made[name] = None
        return self._made[name]


def prove(op, trace: Trace, dims: dict, backend, limits: dict) -> Plan:
    """The trace replays and lowers at the bench shape, the backend can honour it (layer 3
    of legality), and the backend's estimate of each program's needs fits the device's
    `limits` (ProposalContext.limits; empty off a GPU, so nothing is held there). The
    last is advice, not legality: a candidate over it would fail to compile or spill, so a
    proposer skips it rather than spend a worker on it. Raises MoveError."""
    sched = apply_trace(op, trace)
    plan = lower(sched, dims)
    if backend is not None:
        backend.check(sched, plan)
        check_fits(backend.usage(plan), limits)
    return plan
