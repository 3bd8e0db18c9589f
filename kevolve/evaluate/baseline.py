"""The time to beat, taken beside the kernel in the same process: the op's PyTorch reference
in eager mode and under torch.compile. An op without a reference has no torch baseline:
callers compare with kevolve's own default schedule instead, and say so.

torch.compile costs seconds per op (it is cached across processes by Inductor);
KEVOLVE_TORCH_COMPILE=0 leaves it out (the test suite does, except where it tests it)."""

from __future__ import annotations

import os

from .timing import timer

KINDS = ("eager", "compile")


def compile_enabled() -> bool:
    return os.environ.get("KEVOLVE_TORCH_COMPILE", "1") not in ("0", "", "false", "no")


def torch_times(opdef, tensors: dict, params: dict, gpu: bool, repeat: int = 15,
                compile_too: bool | None = None) -> dict:
    """{"eager_ms", "compile_ms", "compile_error"} for the op's reference on these tensors
    (the kernel's own inputs); {} when the op has no reference. A reference that
    torch.compile cannot compile reports why in compile_error (its time is None)."""
    if opdef.torch_eager is None:
        return {}
    import torch

    fn, t = opdef.torch_eager, timer(gpu, repeat)
    out: dict = {"eager_ms": None, "compile_ms": None, "compile_error": None}
    with torch.no_grad():
        out["eager_ms"] = t(lambda: fn(tensors, params))
        if not (compile_enabled() if compile_too is None else compile_too):
            out["compile_error"] = "not timed (KEVOLVE_TORCH_COMPILE=0)"
            return out
        try:
            compiled = torch.compile(lambda ts: fn(ts, params))
            compiled(tensors)  # compiles here, not inside the timed calls
            out["compile_ms"] = t(lambda: compiled(tensors))
        except Exception as e:  # a reference Inductor cannot compile: eager still stands
            out["compile_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}" \
                if str(e) else type(e).__name__
    return out


def describe(times: dict, default_ms: float | None = None) -> str:
    """One line saying what the kernel was compared with."""
    if not times:
        d = "" if default_ms is None else f" ({default_ms:.4g} ms)"
        return f"no torch reference: the baseline is kevolve's default schedule{d}"
    comp = (f"torch.compile {times['compile_ms']:.4g} ms" if times.get("compile_ms")
            else f"torch.compile not timed: {times.get('compile_error')}")
    return f"torch eager {times['eager_ms']:.4g} ms, {comp}"
