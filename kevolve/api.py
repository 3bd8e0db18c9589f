"""The embedding API: what a compiler that embeds kevolve calls, without the CLI.

    from kevolve import api
    op = ...                                   # built with kevolve.ir.builder
    src = api.lower(op, trace, backend="hip", dims={"M": 4096, "N": 4096})
    kern = api.build(src)                      # compile + load (cached by source hash)
    kern(inputs, outputs, params)              # writes into caller-allocated outputs

A trace may be a Trace, a dict, a JSON string, or None for the op's default schedule.
`dims` fixes the shape class the plan is specialized for; kernels guard it at launch. Every
call goes through kevolve.pipeline, so errors carry the stage that raised them.
"""

from __future__ import annotations

from . import pipeline
from .backends.base import Backend, Kernel, KernelSource
from .backends.registry import get as get_backend
from .backends.registry import names as backend_names
from .ir.nodes import Op
from .pipeline import as_trace
from .plan.model import Plan
from .schedule import Schedule


def schedule(op: Op, trace=None, dims: dict[str, int] | None = None) -> Schedule:
    """Apply a trace (moves checked for schema and semantics)."""
    return pipeline.schedule(op, trace, dims)


def plan(op: Op, trace=None, dims: dict[str, int] | None = None) -> Plan:
    """Lower a scheduled op for a shape class."""
    if dims is None:
        pipeline.schedule(op, trace, dims)  # a bad trace is reported first
        raise TypeError("plan() needs dims: the sizes of the shape class to lower for")
    return pipeline.lower(op, trace, dims).plan


def backend(name_or_backend: str | Backend, **options) -> Backend:
    if isinstance(name_or_backend, Backend):
        return name_or_backend
    return get_backend(name_or_backend, **options)


def lower(op: Op, trace=None, backend: str | Backend = "cpu", dims=None,
          **backend_options) -> KernelSource:
    """Source code for `op` on `backend`; the backend's capability check runs first."""
    be = _backend(backend, **backend_options)
    if dims is None:
        pipeline.schedule(op, trace, dims)  # a bad trace is reported first
        raise TypeError("lower() needs dims: the sizes of the shape class to lower for")
    return pipeline.compile(op, trace, dims, be).source


def build(source: KernelSource, backend: str | Backend | None = None,
          **backend_options) -> Kernel:
    """Compile and load a KernelSource (the backend it was rendered for, by default)."""
    be = _backend(backend or source.backend, **backend_options)
    return pipeline.build(source, be)


_backend = backend

__all__ = ["as_trace", "schedule", "plan", "lower", "build", "backend", "backend_names",
           "Kernel", "KernelSource"]
