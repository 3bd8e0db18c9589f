"""Schedules: how an op runs, as a replayable list of named moves."""

from .apply import apply, apply_trace
from .defaults import default_trace
from .errors import MoveError
from .moves import MOVES, json_schema, trace_schema
from .state import Schedule, initial
from .trace import Move, Trace

__all__ = ["apply", "apply_trace", "default_trace", "MoveError", "MOVES", "json_schema",
           "trace_schema", "Schedule", "initial", "Move", "Trace"]

