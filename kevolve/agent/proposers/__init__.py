"""Proposers: one interface (`propose(ctx, n) -> list[Proposal]`), several sources of ideas.

`heuristic` (offline default: rule-guided mutations plus random exploration), `replay`
(traces from a file), `claude` (the anthropic SDK; extra `llm`)."""

from __future__ import annotations


def make(name: str, **options):
    if name == "heuristic":
        from .heuristic import HeuristicProposer
        return HeuristicProposer(**options)
    if name == "replay":
        from .replay import ReplayProposer
        return ReplayProposer(**options)
    if name == "claude":
        from .claude import ClaudeProposer
        return ClaudeProposer(**options)
    from ...errors import UnknownName

    raise UnknownName(f"unknown proposer {name!r}; use heuristic, claude or replay")
