"""What the search does with each measured candidate, as TVM's meta_schedule does it with
measure callbacks (`AddToDatabase`, `UpdateCostModel`): the loop hands every result to each
callback in turn and knows nothing of where it goes. `AddToArchive` writes results to the
archive; a caller adds its own (a log, a cost model) through `Search(callbacks=...)`.

Progress is a second, lighter channel: `on_event(kind, data)` with kinds `start`,
`result`, `reused`, `remeasured`, `suspicious`, `rejected`, `pairing`, `stalled` (the CLI's
progress bar is one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..archive.records import Scored
from ..evaluate.job import Result

# on_event(kind, data): the progress channel.
OnEvent = Callable[[str, dict], None]


@dataclass(frozen=True)
class Measured:
    """One result the search has for a candidate: evaluated now, copied from a candidate
    whose generated code is identical (`Result.message` says "reused"), or a stale result
    measured again (`remeasure_of`: the result it replaces)."""

    candidate: int
    trace_json: str
    result: Result
    run_hash: str | None  # the RunKey hash of the code that ran (None: it did not render)
    remeasure_of: Scored | None = None


class MeasureCallback(Protocol):
    def __call__(self, m: Measured) -> None: ...


class AddToArchive:
    """Writes each result to the archive, under where and how it ran."""

    def __init__(self, archive, hardware: str, backend: str, toolchain: dict, shape: dict,
                 seeds: tuple[int, ...] = (0, 1, 2)):
        self.archive, self.hardware, self.backend = archive, hardware, backend
        self.toolchain, self.shape, self.seeds = toolchain, shape, seeds

    def __call__(self, m: Measured) -> None:
        self.archive.add_result(m.candidate, self.hardware, self.backend, self.toolchain,
                                m.result, m.run_hash, self.shape, list(self.seeds))
