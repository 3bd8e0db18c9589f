"""The evolve loop end to end on the cpu backend at small shapes: budgets, the archive,
dedupe of identical generated code, resume, and failures recorded without stopping."""

from __future__ import annotations

import json
import sqlite3

import pytest

from kevolve.archive import Archive
from kevolve.schedule import Trace
from kevolve.search import Search, SearchConfig, evolve


def cfg(tmp_path, **kw) -> SearchConfig:
    base = dict(op="softmax", backend="cpu", budget=6, shape="small", db=str(tmp_path / "a.db"),
                threads=1, repeat=3, timeout_s=600)
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
        # and once more, in a third order
        {"op": "softmax", "moves": [{"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
                                    {"m": "compute_at", "stage": "mx", "at": ["y", "i"]},
                                    {"m": "inline", "stage": "e"},
                                    {"m": "compute_at", "stage": "s", "at": ["y", "i"]}]},
    ]
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(traces))
    s = evolve(cfg(tmp_path, budget=8, proposer="replay",
                   proposer_options={"path": str(path)}))
    assert s.failures.get("legality") == 1
    assert s.reused >= 2  # reordered moves, identical code: not run again
    arch = Archive(str(tmp_path / "a.db"))
    try:
        hist = arch.history("softmax", "cpu")
    finally:
        arch.close()
    verdicts = [h["verdict"] for h in hist]
    assert "legality" in verdicts and "ok" in verdicts
    with sqlite3.connect(tmp_path / "a.db") as c:
        notes = [m for (m,) in c.execute("select message from results where message like "
                                         "'%reused%'")]
    # a copy of a copy says it is reused once
    assert len(notes) == s.reused and all(m.count("[reused:") == 1 for m in notes), notes


def test_unknown_op_is_a_user_error(tmp_path):
    with pytest.raises(KeyError):
        evolve(cfg(tmp_path, op="no_such_op"))


def _results(db: str, cand: int) -> list[sqlite3.Row]:
    with sqlite3.connect(db) as c:
        c.row_factory = sqlite3.Row
        return c.execute("select * from results where candidate_id = ? order by id",
                         (cand,)).fetchall()


def _age(db: str, cand: int, factor: float) -> float:
    """Make a candidate's latest result look measured on other generated code: another run
    hash and a time `factor` x its own. Returns that time."""
    row = _results(db, cand)[-1]
    t = row["time_ms"] * factor
    with sqlite3.connect(db) as c:
        c.execute("update results set run_hash = ?, time_ms = ?, times_ms = ? where id = ?",
                  (f"older-code-{cand}", t, json.dumps([t]), row["id"]))
    return t


def _fastest_ok(db: str) -> list[int]:
    with sqlite3.connect(db) as c:
        return [r[0] for r in c.execute("select candidate_id from results where verdict = 'ok' "
                                        "and time_ms is not null order by time_ms")]


def test_stale_fastest_results_are_measured_again_first(tmp_path):
    """Archived times from other generated code (here: faked 1000x too fast) are measured
    again before the search goes on; only the `refresh` fastest, and only stale ones."""
    db = str(tmp_path / "a.db")
    evolve(cfg(tmp_path, budget=5))
    order = _fastest_ok(db)
    assert len(order) >= 4
    fake = {c: _age(db, c, 1e-3) for c in order[:2]}  # the two fastest, aged
    slow_stale = order[-1]
    _age(db, slow_stale, 1.0)  # stale too, but not among the fastest after aging
    events = []
    s = evolve(cfg(tmp_path, budget=0, refresh=3), lambda k, d: events.append((k, d)))
    assert (s.evaluated, s.remeasured, s.remeasure_failed) == (0, 2, 0)
    assert [d["candidate"] for k, d in events if k == "remeasured"] == order[:2]
    probe = Search(cfg(tmp_path))
    for cand, t in fake.items():
        old, new = _results(db, cand)
        assert new["run_hash"] == probe.render_hash(_trace(db, cand))[0]
        assert new["verdict"] == "ok" and new["time_ms"] > 100 * t
        assert json.loads(new["diagnostics"])["remeasured_from"] == {
            "time_ms": t, "run_hash": f"older-code-{cand}"}
    assert len(_results(db, slow_stale)) == 1 and len(_results(db, order[2])) == 1
    assert s.best.result.time_ms not in fake.values()
    with Archive(db, create=False) as a:
        best = a.best("softmax", "cpu")
    assert best.result.time_ms not in fake.values()
    assert not best.result.source_hash.startswith("older-code")


def _trace(db: str, cand: int) -> Trace:
    with sqlite3.connect(db) as c:
        (tj,) = c.execute("select trace_json from candidates where id = ?", (cand,)).fetchone()
    return Trace.from_json(tj)


def test_a_stale_result_whose_trace_no_longer_lowers_leaves_the_population(tmp_path):
    db = str(tmp_path / "a.db")
    evolve(cfg(tmp_path, budget=4))
    best = _fastest_ok(db)[0]
    _age(db, best, 1e-3)
    broken = {"op": "softmax", "moves": [{"m": "bind", "stage": "y", "axis": "nope",
                                          "to": "grid"}]}
    with sqlite3.connect(db) as c:  # as if a newer kevolve no longer allowed its moves
        c.execute("update candidates set trace_json = ? where id = ?",
                  (json.dumps(broken), best))
    s = evolve(cfg(tmp_path, budget=0, refresh=1))
    assert (s.remeasured, s.remeasure_failed) == (1, 1)
    old, new = _results(db, best)
    assert new["verdict"] == "legality" and "nope" in new["message"]
    assert s.best is not None and s.best.candidate_id != best


def test_population_drop_falls_back_to_the_next_in_the_niche():
    import random

    from kevolve.archive.records import Scored
    from kevolve.evaluate.job import Result
    from kevolve.search.population import Population

    tj = json.dumps({"op": "softmax", "moves": []})
    pop = Population(random.Random(0))
    pop.add(Scored(tj, Result("ok", time_ms=1.0), 1))
    pop.add(Scored(tj, Result("ok", time_ms=2.0), 2))
    assert pop.best.candidate_id == 1 and pop.kth_time(2) == 2.0
    pop.drop(1)
    assert pop.best.candidate_id == 2 and pop.kth_time(2) == float("inf")
    pop.drop(2)
    assert pop.best is None and pop.elites == {}


def test_evolve_refresh_on_the_command_line(tmp_path):
    from click.testing import CliRunner

    from kevolve.cli import main

    db = str(tmp_path / "a.db")
    args = ["evolve", "softmax", "--backend", "cpu", "--shape", "small", "--threads", "1",
            "--db", db, "--json"]
    r = CliRunner().invoke(main, args + ["--budget", "3"])
    assert r.exit_code == 0, r.output
    _age(db, _fastest_ok(db)[0], 1e-3)
    r = CliRunner().invoke(main, args + ["--budget", "0", "--refresh", "0"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.splitlines()[-1])["remeasured"] == 0  # off: left stale
    r = CliRunner().invoke(main, args + ["--budget", "0"])  # the default refreshes
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.splitlines()[-1])
    assert (out["remeasured"], out["remeasure_failed"], out["evaluated"]) == (1, 0, 0)
    # the table has a re-measured column only when something was measured again
    table = [a for a in args if a != "--json"] + ["--budget", "0"]
    r = CliRunner().invoke(main, table, env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "re-measured" not in r.output, r.output
    _age(db, _fastest_ok(db)[0], 1e-3)
    r = CliRunner().invoke(main, table, env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "re-measured" in r.output, r.output


def _loops(plan) -> int:
    return sum(len(k.loops) + sum(len(st.reduce_loops) for st in k.steps)
               for k in plan.kernels)


def _fake_limits(monkeypatch) -> callable:
    """A fake estimate on the cpu backend (the real ones need a GPU): a plan is over the
    limit when it has more loops than softmax's default plan at the small shape (a split,
    rows per program, a looped reduction), so about half the mutations are. Returns the
    test `over(plan)`."""
    from kevolve.backends.cpu import CpuBackend
    from kevolve.backends.usage import Usage
    from kevolve.ops import LIBRARY
    from kevolve.plan import lower
    from kevolve.schedule import apply_trace, default_trace

    sm = LIBRARY["softmax"]
    base = _loops(lower(apply_trace(sm.op, default_trace(sm.op, sm.dims("small"))),
                        sm.dims("small")))

    def over(plan) -> bool:
        return _loops(plan) > base

    def usage(self, plan):
        return (Usage(plan.kernels[0].name, "y", (1, 1, 1), 1, 2 if over(plan) else 1, 1),)

    monkeypatch.setattr(CpuBackend, "usage", usage)
    monkeypatch.setattr(CpuBackend, "limits", lambda self: {"shared_bytes": 1})
    return over


def test_proposals_over_the_devices_limits_are_skipped_and_counted(tmp_path, monkeypatch):
    """The search hands the backend's limits to its proposer, which never sends a worker a
    trace whose estimate is over them; the skips reach the summary and its JSON."""
    from kevolve.ops import LIBRARY
    from kevolve.plan import lower
    from kevolve.schedule import apply_trace

    over = _fake_limits(monkeypatch)
    s = evolve(cfg(tmp_path, budget=12, seed=3))
    assert s.skipped["resources.shared_memory"] > 0
    assert s.to_json()["skipped"] == dict(s.skipped)
    sm = LIBRARY["softmax"]
    with sqlite3.connect(str(tmp_path / "a.db")) as c:
        rows = c.execute("select trace_json, proposer from candidates").fetchall()
    proposed = [Trace.from_json(tj) for tj, who in rows if who == "heuristic"]
    assert proposed  # the mutations within the limit still run
    for t in proposed:  # seeds (the default trace) are not proposals
        assert not over(lower(apply_trace(sm.op, t), sm.dims("small"))), t.to_json()


def test_evolve_shows_the_proposals_skipped_over_the_devices_limits(tmp_path, monkeypatch):
    """`kevolve evolve` adds a skipped column, by reason, only when there were skips."""
    from click.testing import CliRunner

    from kevolve.cli import main

    args = ["evolve", "softmax", "--backend", "cpu", "--budget", "8", "--shape", "small",
            "--threads", "1", "--db", str(tmp_path / "a.db")]
    r = CliRunner().invoke(main, args, env={"COLUMNS": "240"})
    assert r.exit_code == 0, r.output
    assert "skipped" not in r.output  # no limits, no column
    _fake_limits(monkeypatch)
    args[-1] = str(tmp_path / "b.db")
    r = CliRunner().invoke(main, args, env={"COLUMNS": "240"})
    assert r.exit_code == 0, r.output
    assert "skipped" in r.output and "shared_memory" in r.output, r.output


def test_measure_callbacks_see_every_result_the_archive_holds(tmp_path):
    """A caller's measure callback receives each result after the archive writer: the same
    candidates, in the order the archive stored them, with the verdicts it stored."""
    seen = []
    s = evolve(cfg(tmp_path, budget=4), callbacks=(seen.append,))
    with sqlite3.connect(str(tmp_path / "a.db")) as c:
        rows = c.execute("select candidate_id, verdict, run_hash from results order by id")
        stored = [tuple(r) for r in rows]
    assert [(m.candidate, m.result.verdict, m.run_hash) for m in seen] == stored
    assert len(seen) == s.evaluated + s.reused
    assert all(m.remeasure_of is None for m in seen)


def test_proposers_declare_what_the_search_asks_of_them():
    from kevolve.errors import UnknownName
    from kevolve.search.proposers import make, proposer_class
    from kevolve.search.proposers.base import Proposer

    heuristic = make("heuristic", archive=object(), seed=1)  # not handed the archive
    assert isinstance(heuristic, Proposer) and not heuristic.needs_archive
    assert heuristic.fell_back is False and dict(heuristic.skipped) == {}
    assert proposer_class("claude").needs_archive
    with pytest.raises(UnknownName, match="unknown proposer 'nope'"):
        make("nope")
