"""Proposers: one interface (base.Proposer: `propose(ctx, n) -> list[Proposal]`), several
sources of ideas, found by name in a registry (Helion's `search_algorithms` dict).

kevolve's own: `heuristic` (offline default: rule-guided mutations plus random exploration),
`replay` (traces from a file), `llm` (any model, through the anthropic, openai-compatible
or command transport: llm/transports.py) and `claude` (`llm` over anthropic; extra `llm`).
Another package adds one through the `kevolve.proposers` entry-point group (name =
"module:Class"). Nothing is imported until a proposer is asked for."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from ...errors import UnknownName

GROUP = "kevolve.proposers"
BUILTIN = {"heuristic": "kevolve.search.proposers.heuristic:HeuristicProposer",
           "replay": "kevolve.search.proposers.replay:ReplayProposer",
           "claude": "kevolve.search.proposers.llm.claude:ClaudeProposer",
           "llm": "kevolve.search.proposers.llm.proposer:LLMProposer"}


def names() -> dict[str, str]:
    """Proposer name -> 'module:Class': kevolve's own, then those of installed packages."""
    table = dict(BUILTIN)
    for ep in entry_points(group=GROUP):
        table.setdefault(ep.name, ep.value)
    return table


def proposer_class(name: str) -> type:
    table = names()
    if name not in table:
        raise UnknownName(f"unknown proposer {name!r}; use {', '.join(sorted(table))}")
    mod, _, attr = table[name].partition(":")
    return getattr(importlib.import_module(mod), attr)


def make(name: str, archive=None, **options):
    """Proposer `name` (a base.Proposer), options to its constructor; `archive` is handed only
    to one that declares `needs_archive`."""
    cls = proposer_class(name)
    if cls.needs_archive:
        options["archive"] = archive
    return cls(**options)
