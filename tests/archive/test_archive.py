"""The archive (kevolve.archive): round trips, dedupe, best and history, merge,
export/import, schema versioning, foreign and corrupt files, two writers, and SIGKILL."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kevolve.archive import APPLICATION_ID, Archive, ArchiveError, canonical_trace
from kevolve.archive import schema as archive_schema
from kevolve.archive.records import Scored
from kevolve.evaluate.job import Result
from kevolve.ir.builder import axes, compute, dims, f32, input, op
from kevolve.ir.printer import op_text
from kevolve.schedule.trace import Trace

REPO = Path(__file__).resolve().parents[2]


def tiny_op(name: str = "twice", scale: float = 2.0):
    N = dims("N")
    x = input("x", (N,), f32)
    (i,) = axes("i", N)
    return op(name, inputs=[x], outputs=[compute("y", (i,), x[i] * scale)])


def trace(w: int, bn: int = 1024, op_name: str = "twice", indent: int | None = None) -> str:
    return Trace.make(op_name, [{"m": "launch", "num_warps": "$W"}],
                      {"$W": w, "$BN": bn}).to_json(indent=indent)


def ok(t: float, base: float = 1.0) -> Result:
    return Result("ok", time_ms=t, times_ms=(t, t * 1.01, t * 0.99), baseline_ms=base,
                  max_error=1e-7, diagnostics={"gbps": 100.0 / t}, source_hash=f"src{t}",
                  seconds=0.5)


def fail(stage: str = "compile") -> Result:
    return Result(stage, message=f"{stage} failed", diagnostics={"log": "error: x"})


TOOLCHAIN = {"python": "3.11", "cc": "gcc 12"}


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "sub" / "archive.db"


# --- round trips ---------------------------------------------------------------------------

def test_candidate_and_result_round_trip(db):
    with Archive(db) as a:  # creates the folder too
        oid = a.op_id(tiny_op())
        assert a.op_id(tiny_op()) == oid  # insert-or-get by IR hash
        assert a.op_id(tiny_op(scale=3.0)) != oid  # same name, other IR: another op
        cid, new = a.add_candidate(oid, trace(4), proposer="heuristic", generation=2,
                                   note="widen")
        assert new
        child, _ = a.add_candidate(oid, trace(8), parent_id=cid, proposer="claude")
        r = ok(0.25)
        rid = a.add_result(cid, "laptop", "cpu", TOOLCHAIN, r, None, {"N": 4096}, (0, 1, 2))
        assert rid > 0
        a.add_result(child, "laptop", "cpu", TOOLCHAIN, fail("correctness"), "h2", {}, ())

    with Archive(db, create=False) as a:
        got = a.results(cid)
        assert len(got) == 1
        assert got[0]["result"] == r  # every Result field comes back, run_hash = source_hash
        assert got[0]["toolchain"] == TOOLCHAIN
        assert got[0]["shape"] == {"N": 4096} and got[0]["seeds"] == [0, 1, 2]
        c = a.candidate(child)
        assert c["parent_id"] == cid and c["proposer"] == "claude" and c["op_name"] == "twice"
        assert c["ir_text"] == op_text(tiny_op())
        assert a.candidate(cid)["generation"] == 2 and a.candidate(cid)["note"] == "widen"
        assert a.evaluated(oid, "cpu", "laptop") == {cid, child}
        assert a.evaluated(oid, "cpu", "h200") == set()
        assert a.evaluated(oid, "triton", "laptop") == set()
        assert a.find_run(oid, "cpu", "laptop", "src0.25") == r
        assert a.find_run(oid, "cpu", "h200", "src0.25") is None
        assert a.find_run(oid, "cpu", "laptop", "h2").verdict == "correctness"
        assert a.find_run(oid, "cpu", "laptop", None) is None
        scored = a.scored(oid, "cpu", "laptop")
        assert [s.candidate_id for s in scored] == [cid, child]
        assert scored[0] == Scored(trace(4), r, cid, None, "heuristic")
        assert scored[1].parent_id == cid
        assert a.hardware_names() == ["laptop"]
        assert a.candidate(10**6) is None


def test_nan_time_and_numpy_diagnostics_are_stored():
    np = pytest.importorskip("numpy")
    import tempfile

    with tempfile.TemporaryDirectory() as d, Archive(Path(d) / "a.db") as a:
        oid = a.op_id(tiny_op())
        cid, _ = a.add_candidate(oid, trace(1))
        r = Result("timing", time_ms=float("nan"),
                   diagnostics={"regs": np.int64(32), "bw": np.float32(1.5),
                                "hist": np.arange(3)})
        a.add_result(cid, "hw", "cpu", {}, r, None, {}, [np.int64(7)])
        back = a.results(cid)[0]
        assert back["result"].time_ms is None
        assert back["result"].diagnostics == {"regs": 32, "bw": 1.5, "hist": [0, 1, 2]}
        assert back["seeds"] == [7]


def test_dedupe_by_canonical_trace_hash(db):
    with Archive(db) as a:
        oid = a.op_id(tiny_op())
        first, new1 = a.add_candidate(oid, trace(4))
        # same trace: indented, keys in another order, extra whitespace
        d = json.loads(trace(4))
        reordered = json.dumps({k: d[k] for k in reversed(list(d))}, indent=3)
        assert reordered != trace(4)
        again, new2 = a.add_candidate(oid, reordered, proposer="other")
        assert (new1, new2) == (True, False) and again == first
        again2, new3 = a.add_candidate(oid, trace(4, indent=2))
        assert (again2, new3) == (first, False)
        assert a.add_candidate(oid, trace(5))[1] is True
        other_op = a.op_id(tiny_op("thrice", 3.0))
        assert a.add_candidate(other_op, trace(4))[1] is True  # per op
        assert a.candidate(first)["trace_json"] == Trace.from_json(trace(4)).to_json()
        assert a.candidate(first)["trace_hash"] == Trace.from_json(trace(4)).hash
        # junk that is not a valid Trace is still recorded, deduped as canonical JSON
        j1, _ = a.add_candidate(oid, '{"b": 1, "a": [{"m": "nosuchmove"}]}')
        j2, n = a.add_candidate(oid, '{"a": [{"m": "nosuchmove"}], "b": 1}')
        assert j1 == j2 and not n
        assert a.add_candidate(oid, "not json at all")[1] is True


def test_canonical_trace_matches_trace_hash():
    text, h = canonical_trace(trace(4, indent=2))
    t = Trace.from_json(trace(4))
    assert (text, h) == (t.to_json(), t.hash)
    assert canonical_trace(t) == (text, h)


def test_unknown_ids_are_archive_errors(db):
    with Archive(db) as a:
        with pytest.raises(ArchiveError, match="FOREIGN KEY"):
            a.add_candidate(999, trace(1))
        with pytest.raises(ArchiveError, match=str(db)):
            a.add_result(999, "hw", "cpu", {}, ok(1.0))


# --- best and history ----------------------------------------------------------------------

def _search(a: Archive, hardware: str, times: list) -> list[int]:
    oid = a.op_id(tiny_op())
    ids = []
    for i, t in enumerate(times):
        cid, _ = a.add_candidate(oid, trace(i + 1), proposer=f"p{i % 2}")
        a.add_result(cid, hardware, "cpu", TOOLCHAIN, fail() if t is None else ok(t))
        ids.append(cid)
    return ids


def test_best_and_history_best_so_far(db):
    with Archive(db) as a:
        assert a.best("twice", "cpu") is None
        ids = _search(a, "laptop", [3.0, None, 2.0, 2.5, 1.0, None, 1.5])
        h200 = _search(a, "h200", [0.2, 0.1])  # same traces: candidates are shared
        assert h200 == ids[:2]

        best = a.best("twice", "cpu", "laptop")
        assert best.candidate_id == ids[4] and best.result.time_ms == 1.0
        assert best.proposer == "p0" and best.trace_json == Trace.from_json(trace(5)).to_json()
        assert a.best("twice", "cpu").result.time_ms == 0.1  # any hardware
        assert a.best("twice", "cpu", "h200").candidate_id == ids[1]
        assert a.best("twice", "triton") is None
        assert a.best("nosuch", "cpu") is None
        assert a.best("specs/mine.py:twice", "cpu", "h200").candidate_id == ids[1]  # spec ref
        assert len(a.history("specs/mine.py:twice", "cpu", "laptop")) == 7
        rec = a.best_record("twice", "cpu", "laptop")
        assert rec["hardware"] == "laptop" and rec["toolchain"] == TOOLCHAIN

        rows = a.history("twice", "cpu", "laptop")
        assert [r["candidate_id"] for r in rows] == ids
        assert [r["index"] for r in rows] == list(range(1, 8))
        assert [r["verdict"] for r in rows] == ["ok", "compile", "ok", "ok", "ok", "compile",
                                                "ok"]
        assert [r["best_ms"] for r in rows] == [3.0, 3.0, 2.0, 2.0, 1.0, 1.0, 1.0]
        assert [r["improved"] for r in rows] == [True, False, True, False, True, False, False]
        both = a.history("twice")
        assert len(both) == 9
        per_hw = [(r["hardware"], r["index"], r["best_ms"]) for r in both if r["hardware"] ==
                  "h200"]
        assert per_hw == [("h200", 1, 0.2), ("h200", 2, 0.1)]  # best-so-far per hardware


def test_a_candidate_stands_by_its_latest_result(db):
    with Archive(db) as a:
        ids = _search(a, "laptop", [2.0, 1.0])
        assert a.best("twice", "cpu").candidate_id == ids[1]
        time.sleep(0.01)
        # re-timed: the suspicious 1.0 ms did not re-verify
        a.add_result(ids[1], "laptop", "cpu", TOOLCHAIN, fail("timing"))
        assert a.best("twice", "cpu").candidate_id == ids[0]
        rows = a.history("twice", "cpu")
        assert [r["candidate_id"] for r in rows] == ids  # order of first evaluation
        assert rows[1]["verdict"] == "timing"
        assert len(a.scored(a.op_id(tiny_op()), "cpu", "laptop")) == 2


def test_an_untimed_pass_never_hides_a_timed_result(db):
    """Archives written before the verify step stopped recording its correctness-only
    result hold an `ok` without a time after the timed one: the time must still count."""
    with Archive(db) as a:
        ids = _search(a, "laptop", [2.0, 1.0])
        time.sleep(0.01)
        a.add_result(ids[1], "laptop", "cpu", TOOLCHAIN, Result("ok", max_error=1e-7))
        assert a.best("twice", "cpu").candidate_id == ids[1]
        assert [r["time_ms"] for r in a.history("twice", "cpu")] == [2.0, 1.0]
        times = {s.candidate_id: s.result.time_ms
                 for s in a.scored(a.op_id(tiny_op()), "cpu", "laptop")}
        assert times == {ids[0]: 2.0, ids[1]: 1.0}


def test_ceilings_usage_runs(db):
    with Archive(db) as a:
        a.set_ceiling("h200", "copy_gbps", 4100.0)
        a.set_ceiling("h200", "bf16_tflops", 790.5)
        a.set_ceiling("h200", "copy_gbps", 4200.0)  # re-measured: replaced
        assert a.ceilings("h200") == {"bf16_tflops": 790.5, "copy_gbps": 4200.0}
        assert a.ceilings("laptop") == {}
        assert a.hardware_names() == ["h200"]
        oid = a.op_id(tiny_op())
        cid, _ = a.add_candidate(oid, trace(1))
        a.record_usage("claude", "claude-x", 1000, 200, candidate_id=cid)
        a.record_usage("claude", "claude-x", 500, 50, note="rejected: unknown move")
        assert a.usage_totals() == {("claude", "claude-x"): {
            "calls": 2, "input_tokens": 1500, "output_tokens": 250}}
        rid = a.start_run(oid, "cpu", "laptop", {"budget": 40, "seed": 3})
        assert a.last_run(oid, "cpu", "laptop")["status"] == "running"
        a.finish_run(rid)
        run = a.last_run(oid, "cpu", "laptop")
        assert run["settings"] == {"budget": 40, "seed": 3} and run["status"] == "done"
        assert a.last_run(oid, "cpu", "h200") is None
        info = a.info()
        assert info["counts"] == {"ops": 1, "candidates": 1, "results": 0, "ceilings": 2,
                                  "usage": 2, "runs": 1, "baselines": 0,
                                  "prompts": 0}
        assert info["tokens"] == {"input": 1500, "output": 250} and info["unevaluated"] == 1


# --- merge, export, import -----------------------------------------------------------------

def _full(a: Archive, hardware: str, times: list, model: str) -> None:
    ids = _search(a, hardware, times)
    a.add_candidate(a.op_id(tiny_op()), trace(99), parent_id=ids[0], proposer="child")
    a.set_ceiling(hardware, "copy_gbps", 100.0)
    a.record_usage("claude", model, 10, 1, candidate_id=ids[0])
    a.finish_run(a.start_run(a.op_id(tiny_op()), "cpu", hardware, {"budget": len(times)}))


def test_merge_remaps_ids_and_skips_duplicates(tmp_path):
    here, there = tmp_path / "here.db", tmp_path / "gpu.db"
    with Archive(here) as a:
        a.op_id(tiny_op("unrelated", 5.0))  # shifts ids, so remapping shows
        _full(a, "laptop", [3.0, 2.0], "m1")
    with Archive(there) as b:
        _full(b, "h200", [0.3, 0.2, None, 0.1], "m2")  # traces 1, 2 and 99 also exist here
    before = there.read_bytes()

    with Archive(here) as a:
        counts = a.merge(there, trust=True)  # trusted: read as measurements below
        assert counts["ops"] == 0 and counts["skipped"]["ops"] == 1
        assert counts["candidates"] == 2 and counts["skipped"]["candidates"] == 3
        assert counts["results"] == 4 and counts["skipped"]["results"] == 0
        assert counts["ceilings"] == 1 and counts["usage"] == 1 and counts["runs"] == 1
        oid = a.op_id(tiny_op())
        assert oid == 2
        assert a.best("twice", "cpu", "h200").result.time_ms == 0.1
        assert a.best("twice", "cpu", "laptop").result.time_ms == 2.0
        assert [r["best_ms"] for r in a.history("twice", "cpu", "h200")] == [0.3, 0.2, 0.2,
                                                                            0.1]
        # the h200 results landed on this archive's candidates (ids remapped)
        here_ids = {s.candidate_id: s.trace_json for s in a.scored(oid, "cpu", "laptop")}
        for s in a.scored(oid, "cpu", "h200"):
            assert a.candidate(s.candidate_id)["op_id"] == oid
            if s.trace_json in here_ids.values():
                assert here_ids[s.candidate_id] == s.trace_json
        assert a.ceilings("h200") == {"copy_gbps": 100.0}
        assert a.hardware_names() == ["h200", "laptop"]
        assert sum(t["calls"] for t in a.usage_totals().values()) == 2
        total = a.info()["counts"]

        again = a.merge(there, trust=True)  # idempotent
        assert {k: v for k, v in again.items() if k != "skipped"} == dict.fromkeys(
            archive_schema.KINDS, 0)
        assert again["skipped"]["results"] == 4
        assert a.info()["counts"] == total
    assert there.read_bytes() == before  # the source is never written


def test_merge_maps_parents_of_new_candidates(tmp_path):
    here, there = tmp_path / "here.db", tmp_path / "there.db"
    Archive(here).close()
    with Archive(there) as b:
        oid = b.op_id(tiny_op())
        p, _ = b.add_candidate(oid, trace(1))
        c, _ = b.add_candidate(oid, trace(2), parent_id=p)
    with Archive(here) as a:
        a.op_id(tiny_op("pad", 9.0))
        a.add_candidate(a.op_id(tiny_op("pad", 9.0)), trace(7, op_name="pad"))
        a.merge(there)
        oid = a.op_id(tiny_op())
        ids = sorted(r[0] for r in a._read("SELECT id FROM candidates WHERE op_id = ?",
                                             (oid,)))
        assert ids != [p, c]
        assert a.candidate(ids[1])["parent_id"] == ids[0]


def test_merge_reads_a_live_archive_through_its_wal(tmp_path):
    live, dst = tmp_path / "live.db", tmp_path / "dst.db"
    with Archive(live) as a:  # still open: its last transactions are only in the WAL
        _search(a, "hw", [3.0, 2.0, 1.0])
        assert Path(f"{live}-wal").stat().st_size > 0
        with Archive(dst) as b:
            assert b.merge(live, trust=True)["results"] == 3
            assert b.best("twice", "cpu").result.time_ms == 1.0
        _search(a, "hw2", [0.5])  # the source still takes writes


def test_merge_errors_name_the_file(tmp_path):
    a_path = tmp_path / "a.db"
    with Archive(a_path) as a:
        with pytest.raises(ArchiveError, match="no archive to merge at .*missing.db"):
            a.merge(tmp_path / "missing.db")
        with pytest.raises(ArchiveError, match="into itself"):
            a.merge(a_path)
        text = tmp_path / "notes.db"
        text.write_text("hello")
        with pytest.raises(ArchiveError, match="notes.db is not a kevolve archive"):
            a.merge(text)


def test_export_import_round_trip(tmp_path):
    src, dst, out = tmp_path / "src.db", tmp_path / "dst.db", tmp_path / "x.jsonl"
    with Archive(src) as a:
        _full(a, "h200", [0.3, None, 0.1], "m")
        oid = a.op_id(tiny_op())
        a.add_result(a.best("twice", "cpu").candidate_id, "h200", "cpu", TOOLCHAIN,
                     Result("ok", time_ms=0.05, diagnostics={"nan": float("nan")}))
        other = a.op_id(tiny_op("thrice", 3.0))
        a.add_result(a.add_candidate(other, trace(1, op_name="thrice"))[0], "h200", "cpu",
                     {}, ok(9.0))
        counts = a.export_jsonl(out)
        assert counts == {"op": 2, "candidate": 5, "result": 5, "ceiling": 1, "usage": 1,
                          "prompt": 0, "run": 1, "baseline": 0}
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        assert lines[0]["kind"] == "header" and lines[0]["format"] == "kevolve-archive"
        assert all("kind" in x for x in lines)
        src_hist = a.history("twice")
        src_scored = a.scored(oid, "cpu", "h200")
        assert a.export_jsonl(tmp_path / "one.jsonl", op_name="thrice")["candidate"] == 1

    with Archive(dst) as b:
        b.op_id(tiny_op("pad", 9.0))
        counts = b.import_jsonl(out, trust=True)
        assert counts["ops"] == 2 and counts["candidates"] == 5 and counts["results"] == 5
        oid = b.op_id(tiny_op())
        got = b.scored(oid, "cpu", "h200")
        assert [(s.trace_json, s.result.verdict, s.proposer) for s in got] == [
            (s.trace_json, s.result.verdict, s.proposer) for s in src_scored]
        best = b.best("twice", "cpu", "h200")
        assert best.result.time_ms == 0.05 and best.result.diagnostics["nan"] != 0  # NaN kept
        strip = [{k: v for k, v in r.items() if k not in ("candidate_id", "parent_id")}
                 for r in b.history("twice")]
        assert strip == [{k: v for k, v in r.items() if k not in ("candidate_id", "parent_id")}
                         for r in src_hist]
        assert b.ceilings("h200") == {"copy_gbps": 100.0}
        again = b.import_jsonl(out, trust=True)
        assert all(again[k] == 0 for k in archive_schema.KINDS)
        assert b.info()["counts"]["results"] == 5


def test_merge_and_export_carry_the_torch_baselines(tmp_path):
    """The baselines table travels with merge and with export/import: per (op, shape,
    hardware, toolchain, kind) the latest measurement stands, whichever archive has it."""
    gpu, here, out = tmp_path / "gpu.db", tmp_path / "here.db", tmp_path / "x.jsonl"
    shape = {"M": 7, "N": 13}
    with Archive(here) as a:  # measured before the GPU's
        a.set_baselines("twice", shape, "h200", "torch 2.13.0", {"eager": 7.0})
        a.set_baselines("twice", shape, "laptop", "torch 2.13.0", {"eager": 5.0})
    with Archive(gpu) as b:
        _full(b, "h200", [0.3, 0.1], "m")
        b.set_baselines("twice", shape, "h200", "torch 2.13.0", {"eager": 2.0, "compile": 1.5})
        b.set_baselines("twice", shape, "h200", "torch 2.12.0", {"eager": 2.5})
        b.set_baselines("other", shape, "h200", "torch 2.13.0", {"eager": 9.0})
        want = b.baselines("twice")
        b.export_jsonl(out, op_name="twice")
    assert len(want) == 3
    with Archive(here) as a:
        counts = a.merge(gpu)
        assert counts["baselines"] == 4 and counts["skipped"]["baselines"] == 0
        got = {(r["hardware"], r["toolchain"], r["kind"]): r["time_ms"]
               for r in a.baselines("twice")}
        assert got == {("h200", "torch 2.13.0", "eager"): 2.0,
                       ("h200", "torch 2.13.0", "compile"): 1.5,
                       ("h200", "torch 2.12.0", "eager"): 2.5,
                       ("laptop", "torch 2.13.0", "eager"): 5.0}
        assert [r["time_ms"] for r in a.baselines("other")] == [9.0]
        again = a.merge(gpu)
        assert again["baselines"] == 0 and again["skipped"]["baselines"] == 4
        a.set_baselines("twice", shape, "h200", "torch 2.13.0", {"eager": 1.0})  # newer
        assert a.merge(gpu)["baselines"] == 0
        assert {r["time_ms"] for r in a.baselines("twice") if r["hardware"] == "h200"
                and r["kind"] == "eager" and r["toolchain"] == "torch 2.13.0"} == {1.0}
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sum(x["kind"] == "baseline" for x in lines) == 3  # only op 'twice'
    with Archive(tmp_path / "dst.db") as c:
        assert c.import_jsonl(out)["baselines"] == 3
        strip = [{k: v for k, v in r.items()} for r in c.baselines("twice")]
        assert strip == want and c.baselines("other") == []
        assert c.import_jsonl(out)["baselines"] == 0


def test_merge_and_export_carry_the_prompts_with_their_candidates(tmp_path):
    gpu, here, out = tmp_path / "gpu.db", tmp_path / "here.db", tmp_path / "p.jsonl"
    convo = [{"role": "user", "content": "make it <fast> \u00e9"}]
    with Archive(gpu) as b:
        ids = _search(b, "h200", [0.3, 0.2])
        other, _ = b.add_candidate(b.op_id(tiny_op("other", 3.0)), trace(5, op_name="other"))
        p1 = b.record_prompt("llm", "openai", "m", 0.7, 11, 900, 40, 1.5, json.dumps(convo),
                             '{"moves": []}', note="two candidates")
        b.link_prompt(p1, ids[0])
        b.link_prompt(p1, ids[1])
        p2 = b.record_prompt("llm", "command", "stub", None, None, 10, 2, 0.1, "[]", "x")
        b.link_prompt(p2, other)
        b.export_jsonl(out, op_name="twice")
        want = [(p["proposer"], p["transport"], p["temperature"], p["seed"], p["prompt"],
                 p["answer"], p["note"]) for p in b.prompts_of(ids[1])]
    assert len(want) == 1
    with Archive(here) as a:
        a.op_id(tiny_op("unrelated", 5.0))  # shifts ids, so remapping shows
        counts = a.merge(gpu)
        assert counts["prompts"] == 2
        got = {}
        for cid in (a.add_candidate(a.op_id(tiny_op()), trace(i))[0] for i in (1, 2)):
            for p in a.prompts_of(cid):
                got.setdefault(p["id"], (p, set()))[1].add(cid)
        (p, linked), = got.values()
        assert (p["proposer"], p["transport"], p["temperature"], p["seed"], p["prompt"],
                p["answer"], p["note"]) == want[0]
        assert len(linked) == 2 and p["input_tokens"] == 900 and p["latency_s"] == 1.5
        again = a.merge(gpu)
        assert again["prompts"] == 0 and again["skipped"]["prompts"] == 2
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["model"] for x in lines if x["kind"] == "prompt"] == ["m"]  # op 'twice' only
    with Archive(tmp_path / "dst.db") as c:
        assert c.import_jsonl(out)["prompts"] == 1
        assert c.import_jsonl(out)["prompts"] == 0
        cid = c.add_candidate(c.op_id(tiny_op()), trace(2))[0]
        assert [p["prompt"] for p in c.prompts_of(cid)] == [convo]
    bad = [x for x in lines if x["kind"] != "prompt"] + [
        {**next(x for x in lines if x["kind"] == "prompt"), "candidates": [["0" * 64, "f"]]}]
    out.write_text("\n".join(json.dumps(x) for x in bad) + "\n")
    with Archive(tmp_path / "dst2.db") as d, pytest.raises(ArchiveError, match="nothing was"):
        d.import_jsonl(out)


def test_import_rejects_a_bad_file_and_imports_nothing(tmp_path):
    out = tmp_path / "x.jsonl"
    with Archive(tmp_path / "a.db") as a:
        _full(a, "hw", [1.0], "m")
        a.export_jsonl(out)
    lines = out.read_text().splitlines()
    with Archive(tmp_path / "b.db") as b:
        bad = tmp_path / "bad.jsonl"
        bad.write_text("\n".join(lines[:3] + ["{not json"] + lines[3:]) + "\n")
        with pytest.raises(ArchiveError, match=r"bad.jsonl:4: not JSON"):
            b.import_jsonl(bad)
        assert b.info()["counts"]["ops"] == 0  # all or nothing
        bad.write_text("\n".join(lines[1:]) + "\n")
        with pytest.raises(ArchiveError, match="not a kevolve archive export"):
            b.import_jsonl(bad)
        rec = json.loads(lines[2])
        rec["kind"] = "mystery"
        bad.write_text("\n".join([lines[0], lines[1], json.dumps(rec)]) + "\n")
        with pytest.raises(ArchiveError, match="unknown record kind 'mystery'"):
            b.import_jsonl(bad)
        head = json.loads(lines[0])
        head["version"] = 99
        bad.write_text(json.dumps(head) + "\n")
        with pytest.raises(ArchiveError, match="newer than this kevolve"):
            b.import_jsonl(bad)
        with pytest.raises(ArchiveError, match="no file to import"):
            b.import_jsonl(tmp_path / "nope.jsonl")
        assert b.info()["counts"] == dict.fromkeys(archive_schema.KINDS, 0)


# --- the file: versioning, foreign and corrupt files ---------------------------------------

def test_schema_version_and_application_id_are_set(db):
    Archive(db).close()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert APPLICATION_ID == int.from_bytes(b"KEVO", "big")
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(archive_schema.MIGRATIONS)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = "
                                             "'table'")}
        assert {"ops", "candidates", "results", "hardware", "usage", "runs"} <= tables
    finally:
        conn.close()


def test_a_migration_runs_on_open_and_merge_migrates_a_copy(tmp_path, monkeypatch):
    old, new = tmp_path / "old.db", tmp_path / "new.db"
    with Archive(old) as a:
        _search(a, "hw", [1.0])
    before = old.read_bytes()

    def next_step(conn):
        conn.execute("ALTER TABLE results ADD COLUMN energy_j REAL")

    monkeypatch.setattr(archive_schema, "MIGRATIONS", [*archive_schema.MIGRATIONS, next_step])
    with Archive(new) as b:  # a new file gets every step
        b.merge(old, trust=True)  # an older source is migrated in memory, never on disk
        assert b.best("twice", "cpu").result.time_ms == 1.0
    assert old.read_bytes() == before
    with Archive(old) as a:  # opening it for writing migrates it, once
        assert a.best("twice", "cpu").result.time_ms == 1.0
    for path in (old, new):
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(archive_schema.MIGRATIONS)
        cols = [r[1] for r in conn.execute("PRAGMA table_info(results)")]
        assert "energy_j" in cols
        conn.close()


def _foreign_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("CREATE TABLE notes (x)")
    conn.commit()
    conn.close()


def _no_app_id_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE photos (x)")
    conn.commit()
    conn.close()


def _text(path: Path) -> None:
    path.write_text("name,value\na,1\n" * 50)


def _truncated(path: Path) -> None:
    with Archive(path) as a:
        _search(a, "hw", [float(i + 1) for i in range(200)])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _bad_header(path: Path) -> None:
    with Archive(path) as a:
        _search(a, "hw", [1.0])
    data = bytearray(path.read_bytes())
    data[16:18] = (1000).to_bytes(2, "big")  # not a power of two
    path.write_bytes(bytes(data))


def _newer(path: Path) -> None:
    Archive(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {len(archive_schema.MIGRATIONS) + 1}")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("make, what", [
    (_foreign_sqlite, "another application"),
    (_no_app_id_sqlite, "another application"),
    (_text, "not an SQLite database"),
    (_truncated, "truncated"),
    (_bad_header, "corrupt"),
    (_newer, "newer than this kevolve"),
])
def test_bad_files_raise_and_stay_unchanged(tmp_path, make, what):
    path = tmp_path / "archive.db"
    make(path)
    before = path.read_bytes()
    siblings = sorted(p.name for p in tmp_path.iterdir())
    for kwargs in ({}, {"create": False}, {"readonly": True}):
        with pytest.raises(ArchiveError) as e:
            Archive(path, **kwargs)
        assert str(path) in str(e.value) and what in str(e.value)
    with Archive(tmp_path / "other.db") as other, pytest.raises(ArchiveError) as e:
        other.merge(path)
    assert str(path) in str(e.value)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("other")) == \
        siblings


def test_corruption_inside_the_file_is_an_archive_error(tmp_path):
    path = tmp_path / "archive.db"
    with Archive(path) as a:
        _search(a, "hw", [float(i + 1) for i in range(300)])
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for p in range(2, len(data) // page):  # scribble over every page but the header
        data[p * page: p * page + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    before = path.read_bytes()
    with pytest.raises(ArchiveError) as e:
        with Archive(path, create=False) as a:
            a.history("twice")
    assert str(path) in str(e.value) and "corrupt" in str(e.value)
    assert path.read_bytes() == before


def test_missing_file_without_create(tmp_path):
    with pytest.raises(ArchiveError, match="no archive at .*nope.db"):
        Archive(tmp_path / "nope.db", create=False)
    assert not (tmp_path / "nope.db").exists()
    (tmp_path / "empty.db").touch()
    with Archive(tmp_path / "empty.db") as a:  # an empty file becomes an archive
        assert a.info()["schema_version"] == len(archive_schema.MIGRATIONS)


def test_readonly_never_writes(tmp_path):
    path = tmp_path / "a.db"
    with Archive(path) as a:
        _search(a, "hw", [1.0])
    before = path.read_bytes()
    with Archive(path, readonly=True) as r:
        assert r.best("twice", "cpu").result.time_ms == 1.0
        with pytest.raises(ArchiveError, match="read-only"):
            r.set_ceiling("hw", "x", 1)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db"]


def test_validation_reads_one_snapshot_while_another_writer_creates_the_archive(tmp_path):
    """Two workers opening a new archive at once: one creates it (tables and application id
    in one commit) between the other's first and later reads. Read in separate
    transactions, the reader saw id 0 with the tables and called the file foreign."""
    path = tmp_path / "race.db"
    first = sqlite3.connect(path)
    first.execute("PRAGMA journal_mode = WAL")  # readers and the writer run at once
    first.close()

    class Racing:
        """The reader's connection: another writer creates the archive after its first
        statement."""

        def __init__(self, conn):
            self.conn, self.fired = conn, False

        @property
        def in_transaction(self):
            return self.conn.in_transaction

        def execute(self, sql, *args):
            cur = self.conn.execute(sql, *args)
            if sql.startswith("PRAGMA application_id") and not self.fired:
                self.fired = True
                with Archive(path) as other:
                    assert other.info()["schema_version"] == len(archive_schema.MIGRATIONS)
            return cur

    conn = sqlite3.connect(path, isolation_level=None)
    racing = Racing(conn)
    assert archive_schema.validate(racing, path) == 0  # the snapshot from before the commit
    assert racing.fired and not conn.in_transaction
    assert archive_schema.validate(racing, path) == len(archive_schema.MIGRATIONS)  # and after
    conn.close()


# --- processes -----------------------------------------------------------------------------

def _writer(path: str, tag: int, n: int, barrier) -> None:
    with Archive(path) as a:
        oid = a.op_id(tiny_op())
        barrier.wait(600)  # both open, then both write at once (bound: a writer died)
        for i in range(n):
            cid, new = a.add_candidate(oid, trace(i + 1, bn=tag), proposer=f"w{tag}")
            assert new
            a.add_result(cid, "hw", "cpu", {}, ok(1.0 + i))
            if i % 50 == 49:
                barrier.wait(600)  # lockstep: neither may finish before the other starts


def test_two_processes_write_concurrently(tmp_path):
    path = tmp_path / "shared.db"
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(str(path), tag, 200, barrier))
             for tag in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(1200)
        assert p.exitcode == 0
    with Archive(path) as a:
        assert a.check() == ["ok"]
        oid = a.op_id(tiny_op())
        scored = a.scored(oid, "cpu", "hw")
        assert len(scored) == 400
        assert {s.proposer for s in scored} == {"w1", "w2"}
        order = [s.proposer for s in sorted(scored, key=lambda s: s.candidate_id)]
        switches = sum(x != y for x, y in zip(order, order[1:]))
        assert switches >= 2, "the writers did not interleave: both must progress at once"
        assert a.info()["counts"]["ops"] == 1


def _creator(paths: list[str], barrier, failures) -> None:
    for path in paths:
        barrier.wait(600)  # all at once, on a file that does not exist yet (the bound is
        # for a creator that died; a busy machine may take long to start the four)
        try:
            Archive(path).close()
        except ArchiveError as e:
            failures.put(str(e))


def test_processes_creating_one_archive_at_once_all_open_it(tmp_path):
    """Four processes open each of 100 new archives at the same moment. Switching the new
    file to WAL mode meets the others' switch, which SQLite answers with "database is
    locked" at once rather than through its busy timeout; before the archive waited for
    that itself, some of these opens failed (6 of 400 in one run here), within a
    millisecond, with a message claiming 30 s."""
    paths = [str(tmp_path / f"a{i}.db") for i in range(100)]
    ctx = multiprocessing.get_context("spawn")
    barrier, failures = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_creator, args=(paths, barrier, failures)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(1200)
        assert p.exitcode == 0
    errors = []
    while not failures.empty():
        errors.append(failures.get())
    assert not errors, f"{len(errors)} failed opens, e.g. {errors[0]}"
    for path in paths[::10]:
        with Archive(path) as a:
            assert a.check() == ["ok"] and a.info()["counts"]["ops"] == 0


KILL_WRITER = """
import sys
from kevolve.archive import Archive
from kevolve.evaluate.job import Result
from kevolve.ir.builder import axes, compute, dims, f32, input, op
from kevolve.schedule.trace import Trace

N = dims("N"); x = input("x", (N,), f32); (i,) = axes("i", N)
a = Archive(sys.argv[1])
oid = a.op_id(op("twice", inputs=[x], outputs=[compute("y", (i,), x[i] * 2.0)]))
k = 0
while True:
    k += 1
    t = Trace.make("twice", [{"m": "launch", "num_warps": "$W"}], {"$W": k})
    cid, _ = a.add_candidate(oid, t.to_json(), proposer="killme")
    print("c", cid, flush=True)
    rid = a.add_result(cid, "hw", "cpu", {}, Result("ok", time_ms=float(k)), None,
                       {"N": k}, (k,))
    print("r", rid, flush=True)
"""


def test_sigkill_loses_only_uncommitted_writes(tmp_path):
    path = tmp_path / "killed.db"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", KILL_WRITER, str(path)],
                            stdout=subprocess.PIPE, text=True, env=env)
    seen = {"c": set(), "r": set()}
    try:
        while len(seen["r"]) < 150:  # counted, not timed: a busy disk only makes it slower
            line = proc.stdout.readline()
            assert line, f"the writer ended early (rc {proc.poll()})"
            kind, n = line.split()
            seen[kind].add(int(n))
        os.kill(proc.pid, signal.SIGKILL)
        for line in proc.stdout:  # whatever it committed and printed before dying
            kind, n = line.split()
            seen[kind].add(int(n))
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert len(seen["r"]) >= 150
    assert Path(f"{path}-wal").exists()  # committed pages still in the WAL: recovered on open

    # merging the killed archive (read-only, through its WAL) brings every committed result
    with Archive(tmp_path / "elsewhere.db") as b:
        assert b.merge(path)["results"] >= len(seen["r"])

    with Archive(path, create=False) as a:
        assert a.check() == ["ok"]
        cids = {r[0] for r in a._read("SELECT id FROM candidates")}
        rids = {r[0] for r in a._read("SELECT id FROM results")}
        assert seen["c"] <= cids and seen["r"] <= rids  # nothing committed was lost
        oid = a.op_id(tiny_op())
        done = a.evaluated(oid, "cpu", "hw")
        assert len(cids - done) <= 1  # at most the one in flight has no result
        # resume: the archive takes new writes, and a re-proposed trace is not new
        cid, new = a.add_candidate(oid, Trace.make("twice", [{"m": "launch",
                                                              "num_warps": "$W"}],
                                                   {"$W": 1}).to_json())
        assert not new and cid in done
        a.add_result(cid, "hw", "cpu", {}, ok(0.5))
        assert a.best("twice", "cpu").result.time_ms == 0.5


# --- records: run keys, tolerant rows; the search's verbs ----------------------------------

def _old_run_hash(source_hash, backend, toolchain, hardware) -> str:
    """The run hash as kevolve computed it before RunKey: what archived results hold."""
    import hashlib

    key = json.dumps([source_hash, backend, toolchain, hardware], sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:24]


@pytest.mark.parametrize("source_hash, backend, toolchain, hardware", [
    ("0" * 64, "cpu", {}, "cpu:x86_64x16"),
    ("a3f9", "triton", {"python": "3.12.3", "triton": "3.1.0", "numpy": "2.1.0",
                        "torch": "2.5.1", "ptxas": "12.6"}, "gpu:NVIDIA H200"),
    ("ff", "cuda", {"cc": "gcc (Debian 12.2.0-14) 12.2.0", "zeta": "1", "alpha": "2"},
     "gpu:Ünïcode “card”"),
])
def test_run_key_hash_is_the_archived_run_hash(source_hash, backend, toolchain, hardware):
    from kevolve.archive import RunKey

    key = RunKey(source_hash, backend, toolchain, hardware)
    want = _old_run_hash(source_hash, backend, toolchain, hardware)
    assert key.stable_hash() == want
    # the toolchain's order never matters, and the key is a hashable value
    again = RunKey(source_hash, backend, dict(reversed(list(toolchain.items()))), hardware)
    assert again == key and hash(again) == hash(key) and again.stable_hash() == want
    assert RunKey(source_hash, backend, toolchain, hardware + "!").stable_hash() != want


def test_result_rows_from_older_and_newer_versions_are_read():
    from kevolve.archive.records import result_dict, result_of

    newer = {"verdict": "ok", "time_ms": 1.5, "times_ms": "[1.5, 1.6]", "baseline_ms": 3.0,
             "max_error": 1e-7, "message": "", "diagnostics": '{"gbps": 9.0}',
             "run_hash": "rh", "seconds": 0.25, "energy_j": 0.1, "power_w": 300,
             "hardware": "hw", "backend": "cpu", "toolchain": "{}", "shape": '{"N": 4}',
             "seeds": "[0]", "created": 12.0}
    r = result_of(newer)
    assert r == Result("ok", 1.5, (1.5, 1.6), 3.0, 1e-7, "", {"gbps": 9.0}, "rh", 0.25)
    older = {"verdict": "compile", "time_ms": None, "message": None, "created": 1.0}
    r = result_of(older)  # no times, diagnostics, run hash or seconds: the defaults
    assert r == Result("compile")
    d = result_dict(older)
    assert d["toolchain"] == {} and d["shape"] == {} and d["seeds"] == []
    assert d["run_hash"] is None and d["result"] == Result("compile")


def test_result_from_dict_drops_unknown_keys_and_defaults_missing_ones():
    r = ok(2.0)
    assert Result.from_dict({**r.to_dict(), "energy_j": 1.0, "new_field": [1]}) == r
    assert Result.from_dict({"verdict": "timeout"}) == Result("timeout")
    assert Result.from_dict({"verdict": "ok", "times_ms": [1.0, 2.0]}).times_ms == (1.0, 2.0)


def test_an_archive_with_a_column_this_version_does_not_know_reads_the_same(tmp_path):
    """A results table with an extra column (as a newer kevolve's would be, before it
    bumps the version) reads the Results as before."""
    path = tmp_path / "a.db"
    with Archive(path) as a:
        _search(a, "hw", [2.0, 1.0])
        want = a.scored(a.op_id(tiny_op()), "cpu", "hw")
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE results ADD COLUMN energy_j REAL")
    conn.execute("UPDATE results SET energy_j = 7.5")
    conn.commit()
    conn.close()
    with Archive(path) as a:
        assert a.scored(a.op_id(tiny_op()), "cpu", "hw") == want
        assert a.best("twice", "cpu").result.time_ms == 1.0


def test_in_flight_lists_candidates_without_any_result(db):
    with Archive(db) as a:
        oid, other = a.op_id(tiny_op()), a.op_id(tiny_op("pad", 9.0))
        done, _ = a.add_candidate(oid, trace(1))
        a.add_result(done, "hw", "cpu", TOOLCHAIN, ok(1.0))
        first, _ = a.add_candidate(oid, trace(2), note="mutate warps")
        second, _ = a.add_candidate(oid, trace(4), parent_id=first)
        a.add_candidate(other, trace(8, op_name="pad"))
        got = a.in_flight(oid)
        assert got == [(a.candidate(first)["trace_json"], "mutate warps", None),
                       (a.candidate(second)["trace_json"], "", first)]
        a.add_result(first, "other-hw", "cuda", {}, fail())  # a result anywhere counts
        assert [p for _, _, p in a.in_flight(oid)] == [first]


def test_quick_check_passes_a_sound_file_and_refuses_damaged_pages(tmp_path):
    path = tmp_path / "archive.db"
    with Archive(path) as a:
        _search(a, "hw", [float(i + 1) for i in range(300)])
        assert a.quick_check() is None
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for p in range(2, len(data) // page):
        data[p * page + 8: p * page + 72] = b"\xff" * 64
    path.write_bytes(bytes(data))
    with pytest.raises(ArchiveError) as e:
        with Archive(path, create=False) as a:
            a.quick_check()
    assert str(path) in str(e.value) and "corrupt" in str(e.value)


def test_the_reused_marker_is_added_once():
    from kevolve.archive import REUSED, reused

    once = reused(ok(1.0))
    assert once.message == REUSED and reused(once) == once
    assert reused(fail()).message == f"compile failed {REUSED}"


def test_one_default_path():
    import kevolve.archive as archive
    from kevolve.search import SearchConfig

    assert SearchConfig("softmax", "cpu").db == archive.DEFAULT_PATH
