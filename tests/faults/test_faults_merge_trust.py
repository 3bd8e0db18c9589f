"""Archives from elsewhere are evidence, not truth: a planted 0.001 ms result merged from
another archive never becomes the best, never seeds or is reused by a search, and is never
exported, until `kevolve archive verify` measures it again here (or the merge says
--trust)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kevolve.archive import Archive
from kevolve.cli import main
from kevolve.evaluate.job import Result
from kevolve.ops import LIBRARY
from kevolve.schedule import default_trace

SOFTMAX = LIBRARY["softmax"]
SMALL = SOFTMAX.shape("small")
HW = "cpu:somewhere:1t"


def planted_trace() -> str:
    t = json.loads(default_trace(SOFTMAX.op_for(SMALL), SOFTMAX.dims(SMALL)).to_json())
    for m in t["moves"]:
        if m["m"] == "launch":
            m["num_warps"] = 2 if m["num_warps"] != 2 else 1
    return json.dumps(t)


def honest_trace() -> str:
    return default_trace(SOFTMAX.op_for(SMALL), SOFTMAX.dims(SMALL)).to_json()


def archive(path: Path, trace: str, ms: float) -> None:
    with Archive(path) as a:
        oid = a.op_id(SOFTMAX.op_for(SMALL))
        cid, _ = a.add_candidate(oid, trace, proposer="heuristic")
        a.add_result(cid, HW, "cpu", {}, Result("ok", time_ms=ms, times_ms=(ms,)),
                     run_hash=f"run-{ms}", shape=SMALL, seeds=[0, 1, 2])


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_a_planted_result_never_becomes_best_until_verified(tmp_path):
    ours, theirs = tmp_path / "ours.db", tmp_path / "theirs.db"
    archive(ours, honest_trace(), 1.0)
    archive(theirs, planted_trace(), 0.001)
    r = run("archive", "merge", str(theirs), "--db", str(ours), "--json")
    assert r.exit_code == 0, r.output
    with Archive(ours, create=False) as a:
        best = a.best("softmax", "cpu")
        assert best.result.time_ms == 1.0  # before: 0.001, the planted one
        (claim,) = a.untrusted()
        assert claim["origin"] == str(theirs) and claim["result"].time_ms == 0.001
        oid = a.op_id(SOFTMAX.op_for(SMALL))
        assert a.find_run(oid, "cpu", HW, "run-0.001") is None  # never reused
        assert claim["candidate_id"] not in a.evaluated(oid, "cpu", HW)
        assert a.info()["untrusted"] == 1
    r = run("best", "softmax", "--backend", "cpu", "--db", str(ours), "--json")
    assert r.exit_code == 0 and "0.001" not in r.output, r.output
    out = tmp_path / "op.py"
    r = run("export", "softmax", "--backend", "cpu", "-o", str(out), "--db", str(ours))
    assert r.exit_code == 0, r.output
    assert json.loads(planted_trace())["moves"] != json.loads(honest_trace())["moves"]
    assert "0.001" not in out.read_text()


def test_trust_is_explicit(tmp_path):
    ours, theirs = tmp_path / "ours.db", tmp_path / "theirs.db"
    archive(ours, honest_trace(), 1.0)
    archive(theirs, planted_trace(), 0.001)
    assert run("archive", "merge", str(theirs), "--trust", "--db", str(ours)).exit_code == 0
    with Archive(ours, create=False) as a:
        assert a.best("softmax", "cpu").result.time_ms == 0.001
        assert a.untrusted() == []


def test_verify_measures_the_claim_here(tmp_path):
    ours, theirs = tmp_path / "ours.db", tmp_path / "theirs.db"
    archive(theirs, planted_trace(), 0.001)
    assert run("archive", "merge", str(theirs), "--db", str(ours)).exit_code == 0
    r = run("archive", "verify", "--db", str(ours), "--threads", "1", "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["checked"] == 1 and rep["ok"] == 1, rep
    with Archive(ours, create=False) as a:
        assert a.untrusted() == []  # verified: never counted itself, never checked again
        best = a.best("softmax", "cpu")
        assert best.result.time_ms != 0.001 and best.result.ok
    r = run("archive", "verify", "--db", str(ours), "--json")
    assert json.loads(r.output)["checked"] == 0


def test_an_imported_export_is_untrusted_too(tmp_path):
    theirs, ours, lines = tmp_path / "theirs.db", tmp_path / "ours.db", tmp_path / "t.jsonl"
    archive(theirs, planted_trace(), 0.001)
    assert run("archive", "export", str(lines), "--db", str(theirs)).exit_code == 0
    assert run("archive", "import", str(lines), "--db", str(ours)).exit_code == 0
    with Archive(ours, create=False) as a:
        assert a.best("softmax", "cpu") is None and len(a.untrusted()) == 1
