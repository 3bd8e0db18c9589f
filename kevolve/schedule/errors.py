"""Structured schedule errors: `{move_index, code, message, hint}`, for people and LLMs."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..errors import UserError


# Not frozen: Python sets __traceback__ and __notes__ on a raised exception (contextlib's
# @contextmanager, add_note), which a frozen dataclass refuses. eq=False: identity, like
# other exceptions.
@dataclass(eq=False)
class MoveError(UserError):
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
