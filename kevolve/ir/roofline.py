"""The roofline floor of an op at a shape: bytes it must move and FLOPs it must do.

Inputs read once and outputs written once; an input read only through a gather counts the
elements actually gathered (an embedding table is not read whole), capped at its size.
FLOPs count arithmetic per point of each stage's domain (transcendentals count as one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .interp import _Domain, _Run, bind_dims, eval_int
from .nodes import AxisRef, Binary, Load, Op, Reduce, Unary, walk


@dataclass(frozen=True)
class Floor:
    bytes: int
    flops: int

    def time_s(self, bandwidth: float, flop_rate: float) -> float:
        """The floor time against ceilings (bytes/s, FLOP/s)."""
        return max(self.bytes / bandwidth, self.flops / flop_rate)


def floor(op: Op, inputs: dict[str, np.ndarray], params: dict[str, int] | None = None
          ) -> Floor:
    dims = bind_dims(op, inputs, params)
    r = _Run(op, {b.name: np.asarray(inputs[b.name]) for b in op.inputs}, dims, check=False)
    gathered: dict[str, int] = {}
    dense: set[str] = set()
    flops = 0
    input_names = {b.name for b in op.inputs}
    for s in op.stages:
        r.stage = s.name
        dom = _Domain([], {})
        for a in s.axes:
            r.add_axis(dom, a)
        points = int(np.prod(dom.shape)) if dom.shape else 1
        flops += points * _count(s.body, r, dom)
        for n in walk(s.body):
            if isinstance(n, Load) and n.buffer.name in input_names:
                if all(isinstance(i, AxisRef) for i in n.index):
                    dense.add(n.buffer.name)
    for s in op.stages:
        for n, pts in _load_points(s, r):
            if n not in dense:
                gathered[n] = gathered.get(n, 0) + pts
    nbytes = 0
    for b in op.inputs:
        size = int(np.prod(inputs[b.name].shape))
        n = size if b.name in dense or b.name not in gathered else min(size, gathered[b.name])
        nbytes += n * b.dtype.itemsize
    for name in op.outputs:
        b = op.stage(name).out
        nbytes += int(np.prod([eval_int(d, dims) for d in b.shape])) * b.dtype.itemsize
    return Floor(nbytes, flops)


def _count(e, r: _Run, dom: _Domain) -> int:
    """FLOPs per point of `dom` for expression `e` (reductions multiply by their extent)."""
    if isinstance(e, Reduce):
        inner = _Domain(list(dom.shape), dict(dom.axes))
        for a in e.axes:
            r.add_axis(inner, a)
        outer = max(1, int(np.prod(dom.shape)) if dom.shape else 1)
        n = (int(np.prod(inner.shape)) if inner.shape else 1) / outer
        return int(round(n * (1 + _count(e.body, r, inner))))
    c = 1 if isinstance(e, (Binary, Unary)) and not _index_math(e) else 0
    from .nodes import children
    return c + sum(_count(x, r, dom) for x in children(e) if not isinstance(e, Load))


def _index_math(e) -> bool:
    from .nodes import dtype_of
    return not dtype_of(e).is_float


def _load_points(s, r: _Run):
    """(buffer, number of loaded elements) for every load in the stage, reductions expanded."""
    dom = _Domain([], {})
    for a in s.axes:
        r.add_axis(dom, a)
    out = []

    def visit(e, d):
        if isinstance(e, Reduce):
            inner = _Domain(list(d.shape), dict(d.axes))
            for a in e.axes:
                r.add_axis(inner, a)
            visit(e.body, inner)
            return
        if isinstance(e, Load):
            out.append((e.buffer.name, int(np.prod(d.shape)) if d.shape else 1))
        from .nodes import children
        for c in children(e):
            visit(c, d)
    visit(s.body, dom)
    return out
