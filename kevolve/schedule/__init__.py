"""Schedules: how an op runs, as a replayable list of named moves.

`lower`, `Plan` and `KernelPlan` live in kevolve.plan (the layer above); they are still
found here for code written against the old names."""

from .apply import apply, apply_trace
from .defaults import default_trace
from .errors import MoveError
from .moves import MOVES, json_schema, trace_schema
from .state import Schedule, initial
from .trace import Move, Trace

# compatibility re-export, removed at integration: plans live in kevolve.plan. Imported
# last, through the old modules, so that `kevolve.schedule.lower` stays the function.
from .lower import lower  # noqa: E402  (isort: skip)
from .plan import KernelPlan, Plan  # noqa: E402  (isort: skip)


__all__ = ["apply", "apply_trace", "default_trace", "MoveError", "lower", "MOVES",
           "json_schema", "trace_schema", "KernelPlan", "Plan", "Schedule", "initial", "Move",
           "Trace"]
