"""The compile pipeline, the one place that turns (op, trace, dims) into a kernel:

    lower    trace → apply_trace (legality layers 1–2) → plan lowering → backend.check (layer 3)
    compile  lower + backend.render → KernelSource
    build    backend.build → Kernel (cached by source hash where the caller keeps a cache)

The API, the evaluator, the search's run key, the proposers' legality proof, replay, bench and
export all come through here, so a stage means the same everywhere. Each stage names itself in
what it raises: a KevolveError gets `.stage` ("legality" | "render" | "compile") and propagates
as itself (a MoveError is always "legality": it is a legality verdict wherever it is found);
any other exception is a bug and is wrapped as InternalError(stage=...), chained to it.
`on_stage`, where given, is called with each stage's name as it starts (workers report it, so
a killed evaluation says where it was).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .backends.base import Backend, Kernel, KernelSource
from .errors import InternalError, KevolveError
from .ir.nodes import Op
from .plan.lower import lower as lower_plan
from .plan.model import Plan
from .schedule import Schedule, Trace, apply_trace, default_trace
from .schedule.errors import MoveError

__all__ = ["STAGES", "Lowered", "Compiled", "as_trace", "schedule", "lower", "compile", "render",
           "build", "describe"]

STAGES = ("legality", "render", "compile")
OnStage = Callable[[str], None] | None


def as_trace(op: Op, trace, dims: dict[str, int] | None = None) -> Trace:
    """A Trace from None (the op's default schedule for `dims`), a Trace, a dict or JSON."""
    if trace is None:
        return default_trace(op, dims)
    if isinstance(trace, Trace):
        return trace
    if isinstance(trace, str):
        return Trace.from_json(trace)
    return Trace.from_dict(trace)


@dataclass(frozen=True, eq=False)
class Lowered:
    """A trace applied to an op and lowered for a shape class (checked by the backend)."""

    op: Op
    trace: Trace
    dims: dict
    schedule: Schedule
    plan: Plan


@dataclass(frozen=True, eq=False)
class Compiled:
    """A lowered op rendered by a backend."""

    lowered: Lowered
    source: KernelSource


@contextmanager
def _stage(name: str, on_stage: OnStage = None) -> Iterator[None]:
    if on_stage is not None:
        on_stage(name)
    try:
        yield
    except KevolveError as e:
        # SpecError's `stage` is a field of its own (the IR stage it names): left alone
        if "stage" not in getattr(type(e), "__dataclass_fields__", {}):
            e.stage = "legality" if isinstance(e, MoveError) else name
        raise
    except Exception as e:
        raise InternalError(f"{type(e).__name__}: {e}", stage=name) from e


def schedule(op: Op, trace=None, dims: dict[str, int] | None = None) -> Schedule:
    """Apply a trace (moves checked for schema and semantics), without lowering it."""
    with _stage("legality"):
        return apply_trace(op, as_trace(op, trace, dims))


def lower(op: Op, trace, dims: dict[str, int], backend: Backend | None = None,
          on_stage: OnStage = None) -> Lowered:
    """Apply `trace` (None: the default schedule), lower it for `dims` and, given a backend,
    check that the backend can honour it."""
    with _stage("legality", on_stage):
        t = as_trace(op, trace, dims)
        sched = apply_trace(op, t)
        plan = lower_plan(sched, dims)
        if backend is not None:
            backend.check(sched, plan)
    return Lowered(op, t, dict(dims), sched, plan)


def compile(op: Op, trace, dims: dict[str, int], backend: Backend,
            on_stage: OnStage = None) -> Compiled:
    """`lower`, then the backend renders the plan to source."""
    lowered = lower(op, trace, dims, backend, on_stage)
    return Compiled(lowered, render(lowered.plan, backend, on_stage))


def render(plan, backend: Backend, on_stage: OnStage = None) -> KernelSource:
    """The source a plan that `lower` already checked renders to (a proposer that dedups
    its proposals by source has the plan in hand and need not lower it again)."""
    with _stage("render", on_stage):
        return backend.render(plan)


def build(compiled: Compiled | KernelSource, backend: Backend, cache: dict | None = None,
          on_stage: OnStage = None) -> Kernel:
    """Compile and load the source; a `cache` (source hash -> Kernel) skips what it holds."""
    src = compiled.source if isinstance(compiled, Compiled) else compiled
    if cache is not None and src.hash in cache:
        return cache[src.hash]
    with _stage("compile", on_stage):
        k = backend.build(src)
    if cache is not None:
        cache[src.hash] = k
    return k


def describe(e: KevolveError) -> str:
    """A stage's failure in one line: `Class: message` of what went wrong (for an
    InternalError, of the exception it wraps)."""
    return str(e) if isinstance(e, InternalError) else f"{type(e).__name__}: {e}"
