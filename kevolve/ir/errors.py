"""Errors a person (or an LLM) can act on: what is wrong, where, and what to do."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from ..errors import UserError

_IR_DIR = os.path.dirname(os.path.abspath(__file__))


def user_location() -> str | None:
    """`file:line` of the innermost caller outside kevolve's IR package (the user's spec)."""
    f = sys._getframe(1)
    while f is not None:
        path = os.path.abspath(f.f_code.co_filename)
        if not path.startswith(_IR_DIR):
            return f"{f.f_code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return None


@dataclass
class SpecError(UserError):
    """An operator spec is invalid. Carries the stage, axis and source line involved."""

    message: str
    hint: str = ""
    stage: str | None = None
    axis: str | None = None
    loc: str | None = None

    def __str__(self) -> str:
        where = []
        if self.loc:
            where.append(self.loc)
        if self.stage:
            where.append(f"stage {self.stage!r}")
        if self.axis:
            where.append(f"axis {self.axis!r}")
        head = f"{', '.join(where)}: " if where else ""
        tail = f" Fix: {self.hint}" if self.hint else ""
        return f"{head}{self.message}.{tail}"

    @property
    def line(self) -> int | None:
        if self.loc and ":" in self.loc:
            tail = self.loc.rsplit(":", 1)[1]
            return int(tail) if tail.isdigit() else None
        return None


class InterpError(UserError):
    """The reference interpreter met inputs the op does not accept (bad shape, index out of
    bounds, a jagged segment longer than its max_extent)."""
