"""Structured schedule errors: `{move_index, code, message, hint}`, for people and LLMs."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class MoveError(Exception):
    move_index: int | None  # None: the trace as a whole (bad JSON, wrong op, ...)
    code: str  # schema.* | semantics.* | backend.*
    message: str
    hint: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        at = f"move {self.move_index}" if self.move_index is not None else "trace"
        hint = f" Hint: {self.hint}" if self.hint else ""
        return f"{at}: [{self.code}] {self.message}.{hint}"
