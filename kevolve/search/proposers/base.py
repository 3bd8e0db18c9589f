"""The one interface every proposer implements, and the data it is given and gives back.

What the search needs to know of a proposer is declared on it, not probed for:
`needs_archive` (it is handed the archive: it reads the best traces of similar ops and
records its token usage there), `fell_back` (its last answer came from its fall-back, and
the candidates are labelled `<name>->heuristic`) and `skipped` (traces it refused before
evaluation, by MoveError code; the search reports the `resources.*` ones)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, Protocol, runtime_checkable

from ...archive.records import Scored


@dataclass(frozen=True)
class ProposalContext:
    op_name: str  # kevolve.ops.resolve finds the op by it (a name, or a spec file's path)
    op_text: str  # kevolve.ir.printer.op_text
    backend: str
    caps: dict  # the backend's Caps as a dict
    default_trace_json: str
    parents: tuple[Scored, ...]  # chosen by the search (best and diverse)
    best: Scored | None
    history_size: int
    seed: int
    bench_dims: dict = field(default_factory=dict)  # the shape class timing runs at
    gpu: bool = False
    ceilings: dict = field(default_factory=dict)  # measured copy bytes/s, matmul FLOP/s
    similar: tuple[Scored, ...] = ()  # best traces of similar ops (a growing skill library)
    limits: dict = field(default_factory=dict)  # the device's per-program limits (Backend.limits)
    failures: tuple[Scored, ...] = ()  # the latest failed candidates, with their errors
    top: tuple[Scored, ...] = ()  # the fastest few of this op so far
    hardware: str = ""  # the machine's name (hardware.hardware_name)


@dataclass(frozen=True)
class Proposal:
    trace_json: str
    parent_id: int | None
    proposer: str
    note: str = ""  # why (the rule that fired, the LLM's reason)
    prompt_id: int | None = None  # the archived exchange that produced it (LLM proposers)


@runtime_checkable
class Proposer(Protocol):
    """A source of traces. Subclass it (as the built-ins do) to inherit the declared
    attributes' defaults; a proposer overrides those that apply to it."""

    name: ClassVar[str]
    needs_archive: ClassVar[bool] = False  # constructed with archive=<the search's Archive>
    fell_back: bool = False  # the last propose() answered from the fall-back
    skipped: Mapping[str, int] = MappingProxyType({})  # refused before evaluation, by code

    def propose(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        """Up to n new traces. Must not raise for bad model output: record and fall back."""
        ...
