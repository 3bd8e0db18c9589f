"""The host side of a C-family module: the launcher's signature, shape guards and scratch
buffers (from the plan's module signature), and the ctypes arguments of `kv_launch`."""

from __future__ import annotations

import ctypes

import numpy as np

from ...ir.interp import bind_dims
from ...plan.model import Plan
from ...plan.walk import module_signature
from ..pyexpr import Ctx, PyLang, emit
from .language import CStyleLanguage

# Python expressions over dims, for loaders that size the grid and scratch themselves.
HOST_EXPR = PyLang(unary={}, maximum="max", minimum="min",
                   where=lambda c, a, b: f"(({a}) if ({c}) else ({b}))",
                   load=lambda p, off, mask, ld: f"{p}[{off}]",
                   cast=lambda c, t: f"int({c})" if t.is_int else f"float({c})",
                   int_maximum="max", int_minimum="min", floor_native=True)


def c_signature(plan: Plan, lang: CStyleLanguage, restrict: str) -> dict:
    """What every C-family launcher and kernel signature needs: dims in order, the named
    buffers (inputs and outputs, then scratch), kernel parameters and call arguments."""
    sig = module_signature(plan)

    def ctype(n: str) -> str:
        return lang.ptr_type(sig.buffer(n).dtype)
    return {"dims": list(sig.dims), "names": list(sig.names),
            "buffers": [{"name": n, "ctype": ctype(n)} for n in sig.names],
            "params": ", ".join([f"{ctype(n)} *{restrict} p_{n}" for n in sig.every] +
                                [f"const int64_t d_{d}" for d in sig.dims]),
            "args": ", ".join([f"p_{n}" for n in sig.every] + [f"d_{d}" for d in sig.dims])}


def host_parts(plan: Plan, lang: CStyleLanguage) -> tuple[list[str], list[str], list[dict]]:
    """What a host-side C launcher (cpu, mtia) needs beside the kernels: guard conditions,
    their messages (kv_launch returns the 1-based index of the one that failed), and the
    scratch buffers to allocate (name, C type, element count)."""
    sig = module_signature(plan)
    ctx = Ctx()
    guards = [emit(cond, ctx, lang.expr, lambda n: f"p_{n}") for cond, _ in sig.guards]
    messages = [msg for _, msg in sig.guards]
    scratch = []
    for n, b in zip(sig.scratch, sig.scratch_buffers()):
        size = " * ".join(f"({emit(s, ctx, lang.expr, str)})" for s in b.shape) or "1"
        scratch.append({"name": n, "ctype": lang.ptr_type(b.dtype), "size": size})
    return guards, messages, scratch


def launch_args(op, arrays: dict, params: dict, names: list[str], types: dict,
                dims_order: list[str], seen: dict | None = None):
    """kv_launch's pointer and dims arrays from C-contiguous numpy arrays (or CPU torch
    tensors, which share their memory). `seen` remembers the dims per input shapes and
    params, so that a kernel called again on the same shapes skips solving them."""
    ptrs = (ctypes.c_void_p * len(names))()
    for i, n in enumerate(names):
        a = arrays[n]
        if not isinstance(a, np.ndarray):
            a = a.numpy()
        if a.dtype != types[n].np or not a.flags.c_contiguous:
            raise TypeError(f"buffer {n!r} must be a C-contiguous {types[n].np} "
                            f"array, got {a.dtype}")
        ptrs[i] = a.ctypes.data
    key = (tuple(tuple(arrays[b.name].shape) for b in op.inputs), tuple(params.items()))
    dims = seen.get(key) if seen is not None else None
    if dims is None:
        dims = bind_dims(op, arrays, params)
        if seen is not None:
            if len(seen) > 4096:  # jagged totals vary call to call: stay bounded
                seen.clear()
            seen[key] = dims
    return ptrs, (ctypes.c_int64 * max(1, len(dims_order)))(*[dims[d] for d in dims_order])
