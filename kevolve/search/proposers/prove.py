"""What every proposer proves about a trace before it reaches a worker."""

from __future__ import annotations

from ... import pipeline
from ...backends.usage import check_fits
from ...errors import InternalError
from ...plan.model import Plan
from ...schedule import Trace


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


# What lowering raises for a trace it does not support (not a bug, not a MoveError): the
# pipeline hands these on wrapped in an InternalError; a proposer just drops the trace.
UNSUPPORTED = (NotImplementedError, KeyError, ValueError)


def unsupported(e: Exception) -> bool:
    """`e` says the trace is not supported (as above), directly or wrapped by the pipeline."""
    return isinstance(e, UNSUPPORTED) or (isinstance(e, InternalError)
                                          and isinstance(e.__cause__, UNSUPPORTED))


def prove(op, trace: Trace, dims: dict, backend, limits: dict) -> Plan:
    """The trace replays and lowers at the bench shape, the backend can honour it (layer 3
    of legality), and the backend's estimate of each program's needs fits the device's
    `limits` (ProposalContext.limits; empty off a GPU, so nothing is held there). The
    last is advice, not legality: a candidate over it would fail to compile or spill, so a
    proposer skips it rather than spend a worker on it. Raises MoveError."""
    plan = pipeline.lower(op, trace, dims, backend).plan
    if backend is not None:
        check_fits(backend.usage(plan), limits)
    return plan
