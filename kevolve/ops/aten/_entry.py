"""How a catalog op is made: `entry` turns an Op (or dtype variants) and its ATen reference
into an OpDef named `aten.NAME`; `at_least` bumps the derived edge shapes of an op whose
windows need a minimum size (a 3-tap convolution over a length of 1 has no output)."""

from __future__ import annotations

from dataclasses import replace

from ...ir.builder import cast, f32
from ...ir.nodes import dtype_of
from ..base import OpDef
from ..spec import define, derived_edges

PREFIX = "aten."
HALF = ("bf16", "f16")


def entry(op, reference, *, inputs=None, edges=None, presets=None, doc="") -> OpDef:
    """An OpDef `aten.<op name>` checked against `reference` (a torch callable
    `(tensors, params) -> outputs` or a torch/ATen name, see kevolve.ops.spec)."""
    d = define(op, reference=reference, inputs=inputs, edge_shapes=edges, presets=presets,
               doc=doc or (reference if isinstance(reference, str) else ""))
    if not d.doc:
        d = replace(d, doc=f"{d.op.name} (torch reference)")
    return replace(d, name=PREFIX + d.op.name)


def at_least(op, mins: dict[str, int], extra: tuple = ()) -> tuple[dict, ...]:
    """The derived edge shapes (every dim 1; primes) with some dims raised to a minimum."""
    out = []
    for e in derived_edges(op):
        out.append({k: (max(v, mins[k]) if k in mins and isinstance(v, int) else v)
                    for k, v in e.items()})
    return tuple(out) + tuple(extra)


def with_half(edges: tuple[dict, ...]) -> tuple[dict, ...]:
    """Edge shapes plus the primes shape in each 16-bit dtype (ops with dtype variants)."""
    last = dict(edges[-1])
    return tuple(dict(e, dtype="f32") for e in edges) + tuple(
        dict(last, dtype=h) for h in HALF)


def f(e):
    """An operand as f32 (16-bit inputs are widened: the math runs in f32, as ATen's does)."""
    return e if dtype_of(e) == f32 else cast(e, f32)
