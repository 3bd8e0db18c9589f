"""The time to beat, taken beside the kernel in the same process: the op's PyTorch reference
in eager mode and under torch.compile. An op without a reference has no torch baseline:
callers compare with kevolve's own default schedule instead, and say so.

torch.compile costs seconds per op (it is cached across processes by Inductor);
KEVOLVE_TORCH_COMPILE=0 leaves it out (the test suite does, except where it tests it)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from .timing import timer

KINDS = ("eager", "compile")


def compile_enabled() -> bool:
    return os.environ.get("KEVOLVE_TORCH_COMPILE", "1") not in ("0", "", "false", "no")


@dataclass(frozen=True)
class Reference:
    """The op's reference, ready to time: eager, and compiled (None with `compile_error`)."""

    eager: Callable
    compiled: Callable | None
    compile_error: str | None


def prepare(opdef, tensors: dict, params: dict, compile_too: bool | None = None
            ) -> Reference | None:
    """The reference's callables on these tensors, compiled and called once here (seconds
    under Inductor), so that a timing lock is held only while they are timed; None for an
    op without a reference. A reference torch.compile cannot compile says why."""
    if opdef.torch_eager is None:
        return None
    import torch

    fn = opdef.torch_eager

    def eager():
        return fn(tensors, params)

    try:
        with torch.no_grad():
            eager()
    except Exception as e:  # the spec's reference is wrong, not the kernel
        from ..ir.errors import SpecError

        first = (str(e).splitlines() or [""])[0][:300]
        raise SpecError(
            f"{opdef.name}'s torch reference {getattr(fn, '__qualname__', '')} raised "
            f"{type(e).__name__}: {first}",
            "a reference is called as reference(tensors, params), tensors a dict of the "
            "op's inputs by name and params a dict of its sizes, and returns the output "
            "(a tuple in output order for several); a torch function's name is called "
            "with the inputs in order", loc=getattr(fn, "loc", None)) from e
    if not (compile_enabled() if compile_too is None else compile_too):
        return Reference(eager, None, "not timed (KEVOLVE_TORCH_COMPILE=0)")
    try:
        with torch.no_grad():
            compiled = torch.compile(lambda ts: fn(ts, params))
            compiled(tensors)  # compiles here, not inside the timed calls
    except Exception as e:  # a reference Inductor cannot compile: eager still stands
        err = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}" if str(e) \
            else type(e).__name__
        return Reference(eager, None, err)
    return Reference(eager, lambda: compiled(tensors), None)


def time_reference(ref: Reference | None, gpu: bool, repeat: int = 15) -> dict:
    """{"eager_ms", "compile_ms", "compile_error"}; {} for no reference. A compiled
    reference that fails when timed (a recompile) reports why, its time None."""
    if ref is None:
        return {}
    import torch

    t = timer(gpu, repeat)
    out: dict = {"eager_ms": None, "compile_ms": None, "compile_error": ref.compile_error}
    with torch.no_grad():
        out["eager_ms"] = t(ref.eager)
        if ref.compiled is not None:
            try:
                out["compile_ms"] = t(ref.compiled)
            except Exception as e:
                out["compile_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
    return out


def describe(times: dict, default_ms: float | None = None) -> str:
    """One line saying what the kernel was compared with."""
    if not times:
        d = "" if default_ms is None else f" ({default_ms:.4g} ms)"
        return f"no torch reference: the baseline is kevolve's default schedule{d}"
    comp = (f"torch.compile {times['compile_ms']:.4g} ms" if times.get("compile_ms")
            else f"torch.compile not timed: {times.get('compile_error')}")
    return f"torch eager {times['eager_ms']:.4g} ms, {comp}"
