"""The evolve loop end to end on the cpu backend at small shapes: budgets, the archive,
dedupe of identical generated code, resume, and failures recorded without stopping."""

from __future__ import annotations

import json
import sqlite3

import pytest

from kevolve.agent.archive import Archive
from kevolve.agent.search import SearchConfig, evolve
from kevolve.schedule import Trace


def cfg(tmp_path, **kw) -> SearchConfig:
    base = dict(op="softmax", backend="cpu", budget=6, shape="small", db=str(tmp_path / "a.db"),
                threads=1, repeat=3, timeout_s=120)
    base.update(kw)
    return SearchConfig(**base)


def evaluated_ids(db: str) -> list[int]:
    with sqlite3.connect(db) as c:
        return [r[0] for r in c.execute("select candidate_id from results")]


def test_search_respects_budget_and_improves_or_keeps_best(tmp_path):
    events = []
    s = evolve(cfg(tmp_path), lambda kind, data: events.append(kind))
    assert s.evaluated <= 6 and s.evaluated >= 3
    assert s.best is not None and s.best.result.ok
    assert s.baseline_ms and s.baseline_ms > 0 and s.default_ms and s.default_ms > 0
    assert s.best.result.time_ms <= s.default_ms
    times = [t for _, t in s.best_so_far]
    assert times == sorted(times, reverse=True)  # best-so-far never gets worse
    assert events[0] == "start" and "result" in events
    ids = evaluated_ids(str(tmp_path / "a.db"))
    assert len(ids) == len(set(ids)) == s.evaluated + s.reused
    out = s.to_json()
    for key in ("op", "backend", "hardware", "evaluated", "failed", "best_time_ms",
                "baseline_ms", "speedup", "best_trace"):
        assert key in out
    Trace.from_dict(out["best_trace"])  # the winner is a valid trace


def test_resume_evaluates_nothing_twice(tmp_path):
    first = evolve(cfg(tmp_path, budget=3))
    before = evaluated_ids(str(tmp_path / "a.db"))
    second = evolve(cfg(tmp_path, budget=6, resume=True))
    after = evaluated_ids(str(tmp_path / "a.db"))
    assert after[: len(before)] == before
    assert len(after) == len(set(after))
    assert second.evaluated <= 6
    assert second.best.result.time_ms <= first.best.result.time_ms


def test_replay_proposer_and_failures_are_recorded(tmp_path):
    traces = [
        {"op": "softmax", "moves": [{"m": "bind", "stage": "mx", "axis": "k", "to": "grid"}]},
        {"op": "softmax", "moves": [{"m": "inline", "stage": "e"},
                                    {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
                                    {"m": "compute_at", "stage": "mx", "at": ["y", "i"]},
                                    {"m": "compute_at", "stage": "s", "at": ["y", "i"]}]},
        # the same generated code as the previous one: moves in another order
        {"op": "softmax", "moves": [{"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
                                    {"m": "inline", "stage": "e"},
                                    {"m": "compute_at", "stage": "mx", "at": ["y", "i"]},
                                    {"m": "compute_at", "stage": "s", "at": ["y", "i"]}]},
    ]
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(traces))
    s = evolve(cfg(tmp_path, budget=8, proposer="replay",
                   proposer_options={"path": str(path)}))
    assert s.failures.get("legality") == 1
    assert s.reused >= 1  # reordered moves, identical code: not run twice
    arch = Archive(str(tmp_path / "a.db"))
    try:
        hist = arch.history("softmax", "cpu")
    finally:
        arch.close()
    verdicts = [h["verdict"] for h in hist]
    assert "legality" in verdicts and "ok" in verdicts


def test_unknown_op_is_a_user_error(tmp_path):
    with pytest.raises(KeyError):
        evolve(cfg(tmp_path, op="no_such_op"))
