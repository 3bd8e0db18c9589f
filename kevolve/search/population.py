"""The search's population, as OpenEvolve's ProgramDatabase holds it: a MAP-Elites grid over
schedule features (reduction strategy, fusion degree, tile class, warps, splits) in which
each niche keeps its fastest correct trace; parents come from the global best and from
random elites."""

from __future__ import annotations

import random

from ..archive.records import Scored
from ..schedule import Trace


def features(t: Trace) -> tuple:
    """MAP-Elites descriptor: reduction strategies, fusion degree, tile class, warps."""
    moves = [m.to_dict() for m in t.moves]
    strat = tuple(sorted({m["strategy"] for m in moves if m["m"] == "reduction"}))
    fusion = sum(m["m"] in ("inline", "compute_at") for m in moves)
    sizes = [v for v in dict(t.decisions).values()] or [0]
    tile = max(sizes).bit_length()
    warps = next((m.get("num_warps", 0) for m in moves if m["m"] == "launch"), 0)
    splits = sum(m["m"] == "split" for m in moves)
    return strat, fusion, tile // 2, warps, splits


class Population:
    """MAP-Elites: the fastest correct trace per feature niche."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.elites: dict[tuple, Scored] = {}
        self.all_ok: list[Scored] = []

    def add(self, s: Scored) -> None:
        if not s.result.ok or s.result.time_ms is None:
            return
        self.all_ok.append(s)
        key = features(Trace.from_json(s.trace_json))
        cur = self.elites.get(key)
        if cur is None or s.result.time_ms < cur.result.time_ms:
            self.elites[key] = s

    @property
    def best(self) -> Scored | None:
        return min(self.elites.values(), key=lambda s: s.result.time_ms, default=None)

    def drop(self, cand: int) -> None:
        """Forget a candidate's result (it is being measured again): its niche falls back
        to the next fastest trace there."""
        gone = [s for s in self.all_ok if s.candidate_id == cand]
        if not gone:
            return
        self.all_ok = [s for s in self.all_ok if s.candidate_id != cand]
        key = features(Trace.from_json(gone[0].trace_json))
        rest = [s for s in self.all_ok if features(Trace.from_json(s.trace_json)) == key]
        if rest:
            self.elites[key] = min(rest, key=lambda s: s.result.time_ms)
        else:
            self.elites.pop(key, None)

    def kth_time(self, k: int) -> float:
        ts = sorted(s.result.time_ms for s in self.all_ok)
        return ts[k - 1] if len(ts) >= k else float("inf")

    def parents(self, n: int) -> tuple[Scored, ...]:
        elites = sorted(self.elites.values(), key=lambda s: s.result.time_ms)
        if not elites:
            return ()
        out = [elites[0]]
        while len(out) < n + 1 and len(out) < len(elites) + 1:
            out.append(self.rng.choice(elites))
        return tuple(out)
