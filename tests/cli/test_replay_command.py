"""`kevolve replay CANDIDATE`: the trace, the regenerated source, the compiler's log and a
fresh evaluation with the recorded seeds, for an ok candidate and for one that failed
legality; unknown candidates and candidates without results are one-paragraph errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kevolve.archive import Archive
from kevolve.cli import main
from kevolve.evaluate.job import Result
from kevolve.ops import LIBRARY
from kevolve.schedule import default_trace

SOFTMAX = LIBRARY["softmax"]
SHAPE = {"M": 8, "N": 64}
BASE = json.loads(default_trace(SOFTMAX.op, SHAPE).to_json())


def _trace(extra, decisions=None) -> str:
    return json.dumps({**BASE, "moves": BASE["moves"] + extra, "decisions": decisions or {}})


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("replay") / "a.db"
    with Archive(path) as a:
        oid = a.op_id(SOFTMAX.op)
        ok, _ = a.add_candidate(oid, _trace([
            {"m": "split", "stage": "y", "axis": "j", "size": "$BN", "into": ["jo", "ji"]},
            {"m": "vectorize", "stage": "y", "axis": "ji", "width": 8}], {"$BN": 16}),
            proposer="heuristic", note="tile j")
        a.add_result(ok, "cpu:test:1t", "cpu", {}, Result(
            "ok", time_ms=0.01, times_ms=(0.01,), baseline_ms=0.02, max_error=1e-7),
            None, SHAPE, [3, 4, 5])
        bad, _ = a.add_candidate(oid, _trace([{"m": "split", "stage": "y", "axis": "nope",
                                               "size": 8}]), parent_id=ok,
                                 proposer="claude", generation=1)
        a.add_result(bad, "cpu:test:1t", "cpu", {}, Result(
            "legality", message="move 5: [schema.unknown_axis] stage 'y' has no loop axis "
            "'nope'"), None, SHAPE, [3, 4, 5])
        orphan, _ = a.add_candidate(oid, _trace([{"m": "launch", "num_warps": 2}]))
    return {"path": str(path), "ok": ok, "bad": bad, "orphan": orphan}


def replay(*args):
    return CliRunner().invoke(main, ["replay", *map(str, args)], env={"COLUMNS": "200"})


def test_replay_ok_candidate_shows_trace_source_compiler_log_and_a_fresh_result(db):
    r = replay(db["ok"], "--db", db["path"])
    assert r.exit_code == 0, r.output
    out = r.output
    assert "proposer heuristic" in out and "note: tile j" in out
    assert 'split(axis="j", into=["jo", "ji"], size="$BN", stage="y")' in out
    assert "seeds [3, 4, 5]" in out
    assert "== source (cpu" in out and "int kv_launch(void **bufs" in out
    assert "== compiler" in out and "-O3" in out and "compiled" in out
    now = next(line for line in out.splitlines() if line.startswith("now:"))
    assert now.startswith("now:      ok, ") and " ms, torch eager " in now and "max error" in now
    assert "recorded: ok, 0.01 ms" in out


def test_replay_failed_candidate_shows_the_structured_error(db):
    r = replay(db["bad"], "--db", db["path"])
    assert r.exit_code == 1, r.output  # the candidate fails: shown in full, then exit 1
    assert r.stderr.startswith(f"kevolve: candidate {db['bad']} is illegal now")
    out = r.stdout
    assert "proposer claude" in out and f"parent {db['ok']}" in out
    assert '"code": "schema.unknown_axis"' in out and '"move_index": 5' in out
    assert "kv_launch" not in out and "== compiler" not in out  # nothing to compile
    assert "now:      legality" in out and "recorded: legality" in out


def test_replay_without_eval_or_timing_and_errors(db):
    r = replay(db["ok"], "--db", db["path"], "--no-time")
    assert r.exit_code == 0 and "now:      ok, max error" in r.output
    r = replay(db["ok"], "--db", db["path"], "--no-eval")
    assert r.exit_code == 0 and "== compiler" in r.output and "now:" not in r.output
    r = replay(999, "--db", db["path"])
    assert r.exit_code == 2 and "no candidate 999" in r.output
    r = replay(db["orphan"], "--db", db["path"])
    assert r.exit_code == 2 and "no recorded result" in r.output
    r = replay(db["ok"], "--db", db["path"], "--backend", "triton")
    assert r.exit_code == 2 and "no recorded result on backend 'triton'" in r.output


def test_replay_json_is_one_document(db):
    r = replay(db["ok"], "--db", db["path"], "--no-time", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["candidate"] == db["ok"] and doc["compiler"]["ok"] is True
    assert doc["now"]["verdict"] == "ok" and doc["recorded"]["verdict"] == "ok"
    assert "kv_launch" in doc["source"] and doc["trace"]["moves"]
    r = replay(db["bad"], "--db", db["path"], "--no-eval", "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["legality"]["move_index"] == 5
