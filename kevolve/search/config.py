"""What a search is asked to do (SearchConfig) and what it reports (Summary)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from ..archive import DEFAULT_PATH as DEFAULT_DB  # the archive's one default
from ..archive.records import Scored


@dataclass(frozen=True)
class SearchConfig:
    op: str
    backend: str
    budget: int = 64  # candidates evaluated (this run; with resume: in total)
    minutes: float | None = None
    proposer: str = "heuristic"
    proposer_options: dict = field(default_factory=dict)
    workers: int = 1
    executor: str = "local"
    address: str | None = None  # ray cluster
    db: str = DEFAULT_DB
    resume: bool = False
    seed: int = 0
    shape: str | None = None  # preset (default: cpu on CPU backends, gpu on GPU ones)
    shape_overrides: dict = field(default_factory=dict)
    threads: int | None = None
    timeout_s: float = 300.0
    mem_limit_mb: float = 8192.0
    backend_options: dict = field(default_factory=dict)
    top_k: int = 4  # a candidate faster than the k-th best is verified at the bench shape
    refresh: int = 4  # of the k fastest archived results, the stale ones are measured again
    repeat: int = 15
    # A time below roofline_slack x the roofline floor is suspicious (0 turns the check
    # off). It applies when the op moves at least roofline_min_bytes (None: any amount on
    # GPUs, whose timing flushes L2; on CPUs, 4x the last-level cache, since CPU timing
    # reuses cache-resident inputs).
    roofline_slack: float = 0.9
    roofline_min_bytes: int | None = None
    # Identical generated code (another candidate's, measured or in this batch) reuses that
    # result and uses no budget; False: it uses budget (for measuring what dedup saves).
    dedup: bool = True
    # Winners are real: at the end, the `confirm` fastest distinct candidates are timed
    # again over `confirm_rounds` rounds, one at a time in rotating order; the best is the
    # lowest median over rounds, reported with its spread (0: off).
    confirm: int = 0
    confirm_rounds: int = 3
    # Winners are real during the search too: a result faster than the best on its single
    # timing is timed again beside the best over `duel` interleaved rounds, and leads only
    # if it is faster there (0: off).
    duel: int = 0


STALL_ROUNDS = 4  # rounds in a row without a proposal that end a search short of its budget


@dataclass
class Summary:
    op: str
    backend: str
    hardware: str
    evaluated: int = 0
    failed: int = 0
    failures: Counter = field(default_factory=Counter)
    reused: int = 0  # identical generated code: result reused, not re-run
    skipped: Counter = field(default_factory=Counter)  # proposals over the device's limits
    refused: Counter = field(default_factory=Counter)  # every proposal refused, by reason
    remeasured: int = 0  # stale results measured again (not counted in evaluated)
    remeasure_failed: int = 0  # of those, the ones that no longer pass
    best: Scored | None = None
    baseline_ms: float | None = None  # torch eager, timed in this run (never the archive's)
    compile_ms: float | None = None  # torch.compile, timed beside it
    compile_error: str | None = None  # why torch.compile was not timed
    reference: bool = True  # False: no torch reference, the baseline is the default schedule
    paired_ms: float | None = None  # the best schedule, timed in the job that timed eager
    default_ms: float | None = None
    best_so_far: list = field(default_factory=list)  # (index, best time) per evaluation
    seconds: float = 0.0
    stalled: bool = False  # stopped before the budget: the proposer had nothing new
    duels: list = field(default_factory=list)  # candidate, incumbent, won, both medians
    confirmed: list = field(default_factory=list)  # re-timed leaders: candidate, first_ms,
    # median_ms, spread ((max - min) / median over rounds), rounds

    @property
    def best_spread(self) -> float | None:
        """The re-timed best's spread over its rounds (None: not re-timed)."""
        b = self.best
        return next((c["spread"] for c in self.confirmed
                     if b is not None and c["candidate"] == b.candidate_id), None)

    @property
    def speedup_compile(self) -> float | None:
        """torch.compile over the best schedule, both timed side by side in this run."""
        if self.paired_ms and self.compile_ms:
            return self.compile_ms / self.paired_ms
        return None

    @property
    def speedup_default(self) -> float | None:
        """kevolve's default schedule over the best one (the baseline without a reference)."""
        if self.best and self.best.result.time_ms and self.default_ms:
            return self.default_ms / self.best.result.time_ms
        return None

    @property
    def speedup(self) -> float | None:
        """torch eager over the best schedule, both timed side by side in this run."""
        if self.paired_ms and self.baseline_ms:
            return self.baseline_ms / self.paired_ms
        if self.best and self.best.result.time_ms and self.baseline_ms:
            return self.baseline_ms / self.best.result.time_ms
        return None

    def to_json(self) -> dict:
        b = self.best
        return {"op": self.op, "backend": self.backend, "hardware": self.hardware,
                "evaluated": self.evaluated, "failed": self.failed,
                "failures": dict(self.failures), "reused": self.reused,
                "skipped": dict(self.skipped), "refused": dict(self.refused),
                "remeasured": self.remeasured,
                "remeasure_failed": self.remeasure_failed,
                "best_time_ms": b.result.time_ms if b else None,
                "baseline_ms": self.baseline_ms, "paired_ms": self.paired_ms,
                "default_ms": self.default_ms,
                "speedup": self.speedup, "compile_ms": self.compile_ms,
                "compile_error": self.compile_error,
                "speedup_compile": self.speedup_compile, "reference": self.reference,
                "speedup_default": self.speedup_default,
                "best_trace": json.loads(b.trace_json) if b else None,
                "best_candidate": b.candidate_id if b else None,
                "best_so_far": self.best_so_far, "seconds": self.seconds,
                "duels": self.duels, "confirmed": self.confirmed,
                "best_spread": self.best_spread,
                "stalled": self.stalled}
