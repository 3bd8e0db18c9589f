"""Replay: traces from a file, in order (reproduce a search, or seed one).

The file is a JSON list of traces, or JSON lines (one trace per line)."""

from __future__ import annotations

import json
from pathlib import Path

from ...schedule import Trace
from .base import Proposal, ProposalContext, Proposer


def read_traces(path: str | Path) -> list[str]:
    text = Path(path).read_text()
    try:
        data = json.loads(text)
        items = data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        items = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [Trace.from_dict(d).to_json() for d in items]


class ReplayProposer(Proposer):
    name = "replay"

    def __init__(self, path: str | Path, **_):
        self.queue = read_traces(path)

    def propose(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        out, self.queue = self.queue[:n], self.queue[n:]
        return [Proposal(t, None, self.name, "replayed") for t in out]
