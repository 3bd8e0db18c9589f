"""Schedules: how an op runs, as a replayable list of named moves."""

from .apply import apply, apply_trace
from .defaults import default_trace
from .errors import MoveError
from .moves import MOVES, json_schema, trace_schema
from .state import Schedule, initial
from .trace import Move, Trace

__all__ = ["apply", "apply_trace", "default_trace", "MoveError", "MOVES", "json_schema",
           "trace_schema", "Schedule", "initial", "Move", "Trace"]


def __getattr__(name: str):
    """`kevolve.schedule.lower`, the old home of kevolve.plan.lower: compatibility for
    kevolve.agent's tests until they import it from kevolve.plan (deleted at integration).
    Looked up on use, so this package never loads the layer above it."""
    if name == "lower":
        from ..plan.lower import lower

        return lower
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
