"""Finding backends by name, through the `kevolve.backends` entry-point group only: kevolve's
own six are listed in its pyproject.toml exactly as a third-party package lists its own. A
checkout run without installed metadata (PYTHONPATH=., as on the GPU machine) reads the same
table from the pyproject.toml beside the package. Nothing is imported until a backend is
asked for."""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path

from ..errors import UnknownName
from .base import Backend

GROUP = "kevolve.backends"
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@cache
def pyproject_table(path: Path = PYPROJECT) -> dict[str, str]:
    """kevolve's own entry points as its pyproject.toml lists them (empty if there is none:
    an installed wheel has no pyproject.toml beside the package)."""
    if not path.is_file():
        return {}
    import tomllib

    project = tomllib.loads(path.read_text()).get("project", {})
    if project.get("name") != "kevolve":
        return {}
    return dict(project.get("entry-points", {}).get(GROUP, {}))


def _present(target: str) -> bool:
    try:
        return importlib.util.find_spec(target.split(":")[0]) is not None
    except (ImportError, ValueError):
        return False


def names() -> dict[str, str]:
    """Backend name -> 'module:attr' for every backend this installation can offer."""
    eps = list(entry_points(group=GROUP))
    installed = any(ep.dist is not None and ep.dist.name == "kevolve" for ep in eps)
    table = {} if installed else dict(pyproject_table())
    for ep in eps:
        table.setdefault(ep.name, ep.value)
    return {n: t for n, t in table.items() if _present(t)}


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
