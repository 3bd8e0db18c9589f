"""Which ptxas turns the Triton backend's PTX into machine code.

Triton uses the ptxas it bundles unless TRITON_PTXAS_PATH names another; torch.compile sets
that variable, for the whole process, to the newer ptxas torch bundles. The two can give the
same kernel different machine code: on the H200, jagged_softmax's one-program-per-segment
kernel took 146 registers and 0.153 ms with Triton's ptxas 12.8 and 128 registers and
0.099 ms with torch's 13.0 (benchmarks/results/h200-ptxas.txt). So the choice is made
explicitly, the same in the search's workers and in the bench, and it is part of the
toolchain a result is recorded under.

Triton reads the choice once per process (it caches the ptxas version in its cache key), so
it must be settled before the process compiles its first kernel: `use()` refuses to change
it afterwards."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

from ..toolchain import tool_version

ENV = "TRITON_PTXAS_PATH"
CHOICES = ("auto", "triton", "torch")


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)  # no import: torch takes seconds to import
    return Path(spec.origin).parent if spec and spec.origin else None


def bundled() -> dict[str, Path]:
    """The ptxas binaries that ship with the Python packages here: {"triton": ..., "torch":
    ...} (torch's only in CUDA builds of torch, where torch.compile uses it)."""
    out = {}
    for pkg, rel in (("triton", "backends/nvidia/bin/ptxas"), ("torch", "bin/ptxas")):
        d = _package_dir(pkg)
        if d is not None and os.access(d / rel, os.X_OK):
            out[pkg] = d / rel
    return out


def version(path: str) -> str:
    """`12.8.93` from `ptxas --version`."""
    v = tool_version(path)
    if not re.fullmatch(r"\d+(?:\.\d+)+", v):
        raise ValueError(f"{path!r} does not report a ptxas version: {v[:200]!r}")
    return v


def _key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


def resolve(choice: str = "auto") -> tuple[str, str] | None:
    """(path, version) of the ptxas `choice` names: "triton" or "torch" (the package's own),
    a path, or "auto": the one TRITON_PTXAS_PATH names if set, else the one Triton already
    compiled with in this process, else the newest bundled one (torch's in CUDA builds of
    torch: what torch.compile would use). None when none is found (Triton then reports its
    own error at compile time)."""
    if choice in ("triton", "torch"):
        found = bundled()
        if choice not in found:
            raise ValueError(f"ptxas={choice!r}: {choice} bundles no ptxas here; use "
                             f"{' or '.join(repr(k) for k in found) or 'a path'} instead")
        path = str(found[choice])
    elif choice == "auto":
        if os.environ.get(ENV):
            path = os.environ[ENV]
        elif in_use := _in_use():
            path = in_use
        elif found := bundled():
            path = str(max(found.values(), key=lambda p: _key(version(str(p)))))
        else:
            return None
    else:
        if not os.access(choice, os.X_OK):
            raise ValueError(f"ptxas={choice!r} is not an executable file; use one of "
                             f"{', '.join(CHOICES)} or a path to ptxas")
        path = choice
    return path, version(path)


def _in_use() -> str | None:
    """The ptxas Triton has already compiled with in this process (its cache key holds that
    one's version from then on), or None before its first compile."""
    import sys

    compiler = sys.modules.get("triton.backends.nvidia.compiler")
    if compiler is None or not compiler.get_ptxas_version.cache_info().currsize:
        return None
    from triton import knobs

    return knobs.nvidia.ptxas.path


def use(path: str) -> None:
    """Make Triton compile this process's kernels with `path`: set before the first compile,
    and refused (RuntimeError) once Triton has compiled with a ptxas of another version."""
    if os.environ.get(ENV) == path:
        return
    current = _in_use()
    if current is not None and version(current) != version(path):
        raise RuntimeError(
            f"Triton has already compiled with ptxas {version(current)} ({current}) in "
            f"this process, and keeps that choice; the triton backend was asked for "
            f"{version(path)} ({path}). Start a fresh process, or ask for the ptxas already "
            "in use (backend option ptxas=...)")
    os.environ[ENV] = path
