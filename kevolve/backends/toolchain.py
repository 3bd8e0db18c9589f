"""The compilers behind the backends: where builds are cached, finding a tool, its version
(what a result is recorded under, and part of cache file names: another compiler, other
machine code), running it, and writing build outputs atomically (workers share the cache)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import threading
from functools import lru_cache
from pathlib import Path

from ..errors import CompileError  # noqa: F401  (raised by run_tool; defined once)


def cache_dir() -> Path:
    """Where builds are cached: $KEVOLVE_CACHE or ~/.cache/kevolve (read once, at the edge)."""
    root = os.environ.get("KEVOLVE_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "kevolve")
    p = Path(root)
    p.mkdir(parents=True, exist_ok=True)
    return p


def find_tool(name: str, given: str | None = None) -> str | None:
    """The path of tool `name` on PATH, or of `given` (a path or name) where one is given."""
    if given:
        return given if shutil.which(given) else None
    return shutil.which(name)


def run_tool(cmd: list[str], env: dict | None = None, tail: int = 6000,
             name_command: bool = True) -> str:
    """Run a compiler: its stdout and stderr when it succeeds; CompileError with the last
    `tail` characters of its message (headed by the command when `name_command`) when not."""
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        if not name_command:
            raise CompileError(r.stderr[-tail:])
        raise CompileError(f"{' '.join(cmd[:2])} ... failed:\n" + (r.stderr or r.stdout)[-tail:])
    return r.stdout + r.stderr


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write `path` through a temporary file and a rename: readers see all of it or none."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    if isinstance(data, str):
        tmp.write_text(data)
    else:
        tmp.write_bytes(data)
    tmp.replace(path)


@lru_cache(maxsize=16)
def tool_version(path: str, hip_platform: str | None = None) -> str:
    """A compiler's version as `--version` prints it: `13.0.88` for nvcc (its `V...`), else
    the lines naming a version (hipcc: HIP's and clang's). `hip_platform` is hipcc's
    HIP_PLATFORM, which decides what it wraps. Part of the toolchain a result is recorded
    under, and of the build cache's file names: another compiler, other code."""
    env = dict(os.environ, HIP_PLATFORM=hip_platform) if hip_platform else None
    try:
        text = subprocess.run([path, "--version"], capture_output=True, text=True,
                              timeout=60, env=env).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"unknown ({type(e).__name__})"
    m = re.search(r"release \S+, V(\d+(?:\.\d+)+)", text)
    if m:
        return m.group(1)
    lines = [ln.strip() for ln in text.splitlines() if "version" in ln.lower()]
    return "; ".join(lines)[:200] or "unknown"


def version_tag(path: str, hip_platform: str | None = None) -> str:
    """Eight hex digits of `tool_version`, for cache file names."""
    return hashlib.sha256(tool_version(path, hip_platform).encode()).hexdigest()[:8]


@lru_cache(maxsize=1)
def cc_version() -> dict:
    """`{"cc": first line of cc --version}` (empty where `cc` does not run): the C compiler
    in the toolchain of the backends that build with the system compiler."""
    try:
        r = subprocess.run(["cc", "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"cc": r.stdout.splitlines()[0] if r.stdout else ""}


def c_compile_log(cc: str, source) -> tuple[bool, str]:
    """Compile a C KernelSource again in a scratch folder (the build cache would skip a source
    it has seen) and return (ok, the command and the compiler's messages)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kevolve-replay-") as d:
        c = os.path.join(d, "kernel.c")
        with open(c, "w") as f:
            f.write(source.text)
        cmd = [cc, *source.flags, "-fdiagnostics-color=never", "-c", c, "-o",
               os.path.join(d, "kernel.o")]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as e:
            return False, f"could not run the compiler: {e}"
        text = (r.stdout + r.stderr).replace(d + os.sep, "")
        head = "$ " + " ".join(os.path.basename(x) if x.startswith(d) else x for x in cmd)
        return r.returncode == 0, head + "\n" + (text.strip() or "(no messages)")
