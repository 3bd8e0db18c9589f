"""Jinja environment for backend templates: StrictUndefined, one template per file."""

from __future__ import annotations

from functools import lru_cache

import jinja2

from ..assets import templates_dir, version


@lru_cache(maxsize=1)
def env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True, autoescape=False)


def render(name: str, **kw) -> str:
    return env().get_template(name).render(**kw)


def banner(comment: str, op: str, backend: str) -> str:
    return render("common/header.j2", comment=comment, version=version(), op=op,
                  backend=backend).rstrip("\n")
