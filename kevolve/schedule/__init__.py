"""Schedules: how an op runs, as a replayable list of named moves, and its lowering."""

from .apply import apply, apply_trace
from .defaults import default_trace
from .errors import MoveError
from .lower import lower
from .moves import MOVES, json_schema, trace_schema
from .plan import KernelPlan, Plan
from .state import Schedule, initial
from .trace import Move, Trace

__all__ = ["apply", "apply_trace", "default_trace", "MoveError", "lower", "MOVES",
           "json_schema", "trace_schema", "KernelPlan", "Plan", "Schedule", "initial", "Move",
           "Trace"]
