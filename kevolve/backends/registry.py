"""Finding backends by name: the built-in ones directly (so a checkout run with
PYTHONPATH=. works, as on the GPU machine), third-party ones through the
`kevolve.backends` entry-point group. Nothing is imported until a backend is asked for."""

from __future__ import annotations

import importlib
import importlib.util
from importlib.metadata import entry_points

from ..errors import UnknownName
from .base import Backend

BUILTIN = {
    "triton": "kevolve.backends.triton:TritonBackend",
    "cpu": "kevolve.backends.cpu:CpuBackend",
    "numba": "kevolve.backends.numba_backend:NumbaBackend",
    "cuda": "kevolve.backends.cuda:CudaBackend",
    "hip": "kevolve.backends.hip:HipBackend",
    "mtia": "kevolve.backends.mtia:MtiaBackend",
}
GROUP = "kevolve.backends"


def _builtin_present(target: str) -> bool:
    mod = target.split(":")[0]
    return importlib.util.find_spec(mod) is not None


def names() -> dict[str, str]:
    """Backend name -> 'module:attr' for every backend this installation can offer."""
    out = {n: t for n, t in BUILTIN.items() if _builtin_present(t)}
    for ep in entry_points(group=GROUP):
        out.setdefault(ep.name, ep.value)
    return out


class UnknownBackend(UnknownName):
    """No backend of that name is installed."""


def get(name: str, **options) -> Backend:
    """An instance of backend `name`; options go to its constructor."""
    table = names()
    if name not in table:
        raise UnknownBackend(f"unknown backend {name!r}; available: {', '.join(sorted(table))}")
    mod, _, attr = table[name].partition(":")
    obj = getattr(importlib.import_module(mod), attr)
    be = obj(**options) if isinstance(obj, type) else obj
    if not isinstance(be, Backend):
        raise TypeError(f"entry point {name!r} did not give a kevolve Backend")
    return be
