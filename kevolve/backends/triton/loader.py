"""Importing Triton in the mode a process needs, and importing a rendered module from the
build cache (Triton reads kernel source from files)."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from pathlib import Path

from ...errors import MissingExtra
from ..base import KernelSource
from ..toolchain import cache_dir, seal, sealed


def require_triton(interpret: bool | None = None):
    """Import Triton. Its interpreter is a process-wide mode fixed when Triton is first
    imported (its standard library is decorated then), so asking for the other mode after
    that is an error rather than a silent mix."""
    if interpret and "triton" not in sys.modules:
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton
    except ImportError as e:
        raise MissingExtra("the triton backend needs Triton: pip install 'kevolve[triton]'") from e
    if interpret is not None and bool(triton.knobs.runtime.interpret) != interpret:
        mode = "on" if interpret else "off"
        was = "off" if interpret else "on"
        raise RuntimeError(f"Triton was imported with its interpreter {was}; to run with "
                           f"it {mode}, start a fresh process "
                           f"{'with' if interpret else 'without'} TRITON_INTERPRET=1")
    return triton


def load_module(source: KernelSource, interpret: bool):
    """Write the module under the cache (Triton reads kernel source from files), import it."""
    d = cache_dir() / "triton"
    d.mkdir(parents=True, exist_ok=True)
    tag = "i" if interpret else "c"
    path = Path(d) / f"k_{source.hash}_{tag}.py"
    if not sealed(path):  # missing, or not this user's own (planted): write it
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(source.text)
        seal(tmp, path)
    name = f"kevolve_triton_{source.hash}_{tag}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[name] = mod
    return mod
