"""Kernels for torch tensors: one op on one backend, lowered and built per shape class.

A shape class is the values of the dims a plan is specialized on (kevolve.ir.nodes.
tiling_dims); a jagged total (the number of rows this batch happens to have) is not one,
so a new batch reuses the built kernel. Bounds that only size a jagged loop (max_len, the
most occurrences of one row in a gather's inverse index) are rounded up to a power of two,
so a handful of classes cover every batch. Per class, the trace comes from the archive
record whose shape is nearest (shape buckets: the best kernel for a training batch is not
the best for a serving request); `None` from `kernel()` means no kernel serves that class,
and the caller runs the original PyTorch code instead.
"""

from __future__ import annotations

import math
import threading
import warnings
from dataclasses import dataclass, field

from ..ir.interp import bind_dims, eval_int
from ..ir.nodes import Dim, Load, Op, tiling_dims, walk


def pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def bound_params(op: Op) -> dict[str, str]:
    """Params that only bound a jagged loop -> the int buffer whose consecutive
    differences they bound (offsets): they can be derived from the inputs."""
    in_shapes = {n.name for b in op.inputs + tuple(s.out for s in op.stages)
                 for e in b.shape for n in walk(e) if isinstance(n, Dim)}
    out: dict[str, str] = {}
    for s in op.stages:
        for a in s.axes + s.reduce_axes:
            if isinstance(a.max_extent, Dim) and a.max_extent.name not in in_shapes:
                bufs = [n.buffer for n in walk(a.extent) if isinstance(n, Load)
                        and n.buffer.dtype.is_int]
                if bufs:
                    out.setdefault(a.max_extent.name, bufs[0].name)
    return {p.name: out[p.name] for p in op.params if p.name in out}


def _code_key(src) -> str:
    """The source less the comment naming its shape class: classes whose generated code is
    the same (a new batch size, most often) share one build."""
    import hashlib
    import json

    plan = (src.meta or {}).get("plan")
    text = src.text.replace(json.dumps(plan.dims_dict), "") if plan is not None else src.text
    return hashlib.sha256(text.encode()).hexdigest()


def _distance(a: dict, b: dict, names) -> float:
    return sum(abs(math.log2((a[n] + 1) / (b[n] + 1))) for n in names
               if isinstance(a.get(n), int) and isinstance(b.get(n), int))


@dataclass
class KernelTable:
    """`op` on `backend`; `records` are (shape, trace) pairs from an archive (None: the
    default schedule for every class; []: no kernel at all)."""

    op: Op
    backend: object
    records: list[tuple[dict, object]] | None = None
    _by_class: dict = field(default_factory=dict)
    _by_code: dict = field(default_factory=dict)  # generated code -> kernel (shared builds)
    _by_shape: dict = field(default_factory=dict)  # input shapes + params -> launch()
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self):
        self.tiling = tiling_dims(self.op)
        self.bounds = bound_params(self.op)

    def params(self, tensors: dict, given: dict[str, int]) -> dict[str, int]:
        """`given` with every derivable bound filled in and rounded up to a power of two."""
        out = dict(given)
        for p, buf in self.bounds.items():
            if p not in out:
                off = tensors[buf]
                n = int((off[1:] - off[:-1]).max()) if off.numel() > 1 else 0
                out[p] = n
            out[p] = pow2(out[p])
        return out

    def kernel(self, tensors: dict, params: dict[str, int]):
        """(kernel, dims) for these inputs, or (None, dims) when none serves them."""
        dims = bind_dims(self.op, tensors, params)
        key = tuple(dims.get(n) for n in self.tiling)
        if key in self._by_class:
            return self._by_class[key], dims
        with self._lock:
            if key not in self._by_class:
                self._by_class[key] = self._build(dims)
        return self._by_class[key], dims

    def _build(self, dims: dict):
        from .. import api
        from ..errors import KevolveError

        if self.records is None:
            candidates = [None]
        else:
            candidates = [t for _, t in sorted(self.records, key=lambda r: _distance(
                r[0], dims, self.tiling))]
        for trace in candidates:
            try:
                src = api.lower(self.op, trace, self.backend, dict(dims))
                key = _code_key(src)
                if key not in self._by_code:
                    self._by_code[key] = api.build(src, self.backend)
                return self._by_code[key]
            except KevolveError as e:
                warnings.warn(f"kevolve: {self.op.name} at {dims}: {e}", stacklevel=3)
        return None

    def launch(self, tensors: dict, params: dict[str, int]):
        """(kernel or None, dims, {output: (shape, torch dtype)}), remembered per input
        shapes and params: the dims and the class follow from those alone."""
        key = (tuple(t.shape for t in tensors.values()), tuple(params.items()))
        got = self._by_shape.get(key)
        if got is None:
            from ..ir.dtypes import torch_dtype

            k, dims = self.kernel(tensors, params)
            shapes = {s.name: ([eval_int(e, dims) for e in s.out.shape],
                               torch_dtype(s.out.dtype))
                      for s in (self.op.stage(n) for n in self.op.outputs)}
            if len(self._by_shape) > 4096:  # jagged totals vary per batch: stay bounded
                self._by_shape.clear()
            got = self._by_shape[key] = (k, dims, shapes)
        return got
