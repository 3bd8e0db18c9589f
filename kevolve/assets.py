"""Files and facts that ship with kevolve: the templates folder and the version.

The templates live at the top of the repository (`templates/`) and inside the wheel as the
package `kevolve.templates` (setup.py maps one onto the other). `templates_dir()` finds
them either way: installed (wheel or editable install) through importlib.resources, or in a
plain checkout run with PYTHONPATH=. and no install.
"""

from __future__ import annotations

import importlib.resources
from functools import lru_cache
from pathlib import Path

_CHECKOUT_TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


@lru_cache(maxsize=1)
def templates_dir() -> Path:
    """The directory holding `<backend>/*.j2` templates (and `common/`)."""
    try:
        root = importlib.resources.files("kevolve.templates")
    except ModuleNotFoundError:
        root = None
    if isinstance(root, Path) and root.is_dir():
        return root
    if (_CHECKOUT_TEMPLATES / "__init__.py").is_file():
        return _CHECKOUT_TEMPLATES
    raise FileNotFoundError(
        "kevolve's templates are missing: expected the package kevolve.templates (an "
        f"installed wheel) or {_CHECKOUT_TEMPLATES} (a checkout); reinstall kevolve")


@lru_cache(maxsize=1)
def version() -> str:
    """The installed distribution's version, or a checkout's from its pyproject.toml. The
    version is in every generated file's banner, so a checkout run with PYTHONPATH=. must
    report what an install of the same tree would: otherwise the same kernel gets two run
    hashes and the archive's results look stale to one of them."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("kevolve")
    except PackageNotFoundError:
        return checkout_version(_CHECKOUT_TEMPLATES.parent / "pyproject.toml")


def checkout_version(pyproject: Path) -> str:
    """`[project] version` of a checkout's pyproject.toml; `0+checkout` without one."""
    import tomllib

    try:
        return str(tomllib.loads(pyproject.read_text())["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "0+checkout"
