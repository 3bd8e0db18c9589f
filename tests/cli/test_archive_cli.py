"""`kevolve best`, `kevolve history` and `kevolve archive info|merge|export|import`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kevolve.archive import Archive, schema_version
from kevolve.cli import main
from kevolve.evaluate.job import Result
from kevolve.ir.builder import axes, compute, dims, f32, input, op
from kevolve.schedule.trace import Trace

ENV = {"COLUMNS": "200"}


def tiny_op(name: str = "twice"):
    N = dims("N")
    x = input("x", (N,), f32)
    (i,) = axes("i", N)
    return op(name, inputs=[x], outputs=[compute("y", (i,), x[i] * 2.0)])


def trace(w: int, name: str = "twice") -> str:
    return Trace.make(name, [{"m": "launch", "num_warps": "$W"}], {"$W": w}).to_json()


def fill(path: Path, hardware: str, times: list, name: str = "twice") -> list[int]:
    """A search: one candidate per time (None: failed to compile)."""
    ids = []
    with Archive(path) as a:
        oid = a.op_id(tiny_op(name))
        for i, t in enumerate(times):
            cid, _ = a.add_candidate(oid, trace(i + 1, name), proposer="heuristic",
                                     generation=i // 2)
            r = (Result("compile", message="error: nope") if t is None else
                 Result("ok", time_ms=t, times_ms=(t,), baseline_ms=2.0))
            a.add_result(cid, hardware, "cpu", {"cc": "gcc"}, r, None, {"N": 1024}, (0, 1, 2))
            ids.append(cid)
        a.set_ceiling(hardware, "copy_gbps", 12.5)
    return ids


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "archive.db"
    fill(path, "laptop", [3.0, None, 2.0, 2.5, 1.0, None, 1.5])
    return path


def invoke(runner, args):
    return runner.invoke(main, args, env=ENV)


def assert_one_paragraph_error(result, *needles: str) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    err = result.stderr.strip()
    assert err.startswith("kevolve: error:") and "\n" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


def test_commands_are_listed(runner):
    result = invoke(runner, ["--help"])
    for name in ("best", "history", "archive"):
        assert f"  {name} " in result.output
    result = invoke(runner, ["archive", "--help"])
    for name in ("info", "merge", "export", "import"):
        assert f"  {name} " in result.output


def test_best_prints_the_trace_and_time(runner, db):
    result = invoke(runner, ["best", "twice", "--backend", "cpu", "--db", str(db)])
    assert result.exit_code == 0, result.output
    head, _, body = result.stdout.partition("\n{")
    assert "--trace > t.json" in result.stderr  # the hint, off stdout
    assert "best twice on cpu (hardware laptop): 1 ms" in head and "2.00x" in head
    assert "candidate 5" in head
    assert Trace.from_json("{" + body) == Trace.from_json(trace(5))


def test_best_json_and_hardware(runner, db):
    fill(db, "h200", [0.5, 0.25])
    result = invoke(runner, ["best", "twice", "-b", "cpu", "--db", str(db), "--json"])
    out = json.loads(result.output)
    assert out["hardware"] == "h200" and out["time_ms"] == 0.25 and out["speedup"] == 8.0
    assert Trace.from_dict(out["trace"]) == Trace.from_json(trace(2))
    assert out["shape"] == {"N": 1024} and out["seeds"] == [0, 1, 2]
    result = invoke(runner, ["best", "twice", "-b", "cpu", "--hardware", "laptop", "--db",
                             str(db), "--json"])
    out = json.loads(result.output)
    assert (out["hardware"], out["time_ms"], out["candidate_id"]) == ("laptop", 1.0, 5)


def test_best_accepts_a_spec_reference(runner, db, tmp_path):
    """The spec's Op is archived under its own name, whatever the file binds it to."""
    spec = tmp_path / "spec.py"
    spec.write_text("from kevolve.ir.builder import axes, compute, dims, f32, input, op\n"
                    "N = dims('N')\nx = input('x', (N,), f32)\n(i,) = axes('i', N)\n"
                    "DOUBLED = op('twice', inputs=[x], outputs=[compute('y', (i,), "
                    "x[i] * 2.0)])\n")
    result = invoke(runner, ["best", f"{spec}:DOUBLED", "-b", "cpu", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "best twice on cpu" in result.output
    missing = invoke(runner, ["best", "some/spec.py:twice", "-b", "cpu", "--db", str(db)])
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_best_errors(runner, db, tmp_path):
    r = invoke(runner, ["best", "nosuch", "-b", "cpu", "--db", str(db)])
    assert_one_paragraph_error(r, "no op named 'nosuch'", str(db), "twice")
    r = invoke(runner, ["best", "twice", "-b", "cuda", "--db", str(db)])
    assert_one_paragraph_error(r, "no successful result", "'cuda'", "cpu on laptop")
    r = invoke(runner, ["best", "twice", "-b", "cpu", "--hardware", "h100", "--db", str(db)])
    assert_one_paragraph_error(r, "hardware 'h100'")
    missing = tmp_path / "missing.db"
    r = invoke(runner, ["best", "twice", "-b", "cpu", "--db", str(missing)])
    assert_one_paragraph_error(r, "no archive at", str(missing))
    assert not missing.exists()  # reading never creates an archive
    empty = tmp_path / "empty.db"
    Archive(empty).close()
    r = invoke(runner, ["best", "twice", "-b", "cpu", "--db", str(empty)])
    assert_one_paragraph_error(r, "is empty")
    only_failures = tmp_path / "f.db"
    fill(only_failures, "laptop", [None, None])
    r = invoke(runner, ["best", "twice", "-b", "cpu", "--db", str(only_failures)])
    assert_one_paragraph_error(r, "no successful result", "2 evaluated, 0 ok")


def test_default_db_is_in_the_working_directory(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = invoke(runner, ["best", "twice", "-b", "cpu"])
    assert_one_paragraph_error(r, f"no archive at {tmp_path.resolve()}/.kevolve/archive.db")
    assert not (tmp_path / ".kevolve").exists()
    fill(tmp_path / ".kevolve" / "archive.db", "laptop", [1.0])
    assert invoke(runner, ["best", "twice", "-b", "cpu"]).exit_code == 0


def test_history_table_and_best_so_far(runner, db):
    result = invoke(runner, ["history", "twice", "--db", str(db)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "twice on cpu, hardware laptop: 7 candidates, 5 ok, best 1 ms (candidate 5, #5)" \
        in out
    spark = next(line for line in out.splitlines() if line.startswith("best so far:"))
    assert spark.split(": ", 1)[1] == "██▅▅▁▁▁"
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == 7
    cells = [[c.strip() for c in row.strip("│").split("│")] for row in rows]
    assert [c[4] for c in cells] == ["ok", "compile", "ok", "ok", "ok", "compile", "ok"]
    assert [c[6] for c in cells] == ["3 *", "3", "2 *", "2", "1 *", "1", "1"]
    assert [c[3] for c in cells] == ["0", "0", "1", "1", "2", "2", "3"]


def test_history_per_hardware_last_and_json(runner, db):
    fill(db, "h200", [0.5, None, 0.25])
    out = invoke(runner, ["history", "twice", "--db", str(db)]).output
    assert "hardware laptop: 7 candidates" in out and "hardware h200: 3 candidates" in out
    out = invoke(runner, ["history", "twice", "--hardware", "h200", "--last", "1", "--db",
                          str(db)]).output
    assert "laptop" not in out
    assert len([line for line in out.splitlines() if line.startswith("│")]) == 1
    rows = json.loads(invoke(runner, ["history", "twice", "-b", "cpu", "--hardware", "h200",
                                      "--json", "--db", str(db)]).output)
    assert [r["best_ms"] for r in rows] == [0.5, 0.5, 0.25]
    assert [r["index"] for r in rows] == [1, 2, 3]


def test_history_errors(runner, db, tmp_path):
    assert_one_paragraph_error(invoke(runner, ["history", "x", "--db", str(db)]),
                               "no op named 'x'")
    assert_one_paragraph_error(invoke(runner, ["history", "twice", "-b", "triton", "--db",
                                               str(db)]),
                               "no evaluated candidates", "backend 'triton'")
    assert_one_paragraph_error(invoke(runner, ["history", "twice", "--db",
                                               str(tmp_path / "no.db")]), "no archive at")


def test_archive_info(runner, db):
    fill(db, "h200", [0.5])
    result = invoke(runner, ["archive", "info", "--db", str(db), "--check"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"schema {schema_version()}" in out
    assert "1 op, 7 candidates (0 never evaluated), 8 results" in out
    assert "integrity check: ok" in out and "ceilings on h200: copy_gbps=12.5" in out
    assert "0 LLM calls" in out and "0 runs" in out
    data = json.loads(invoke(runner, ["archive", "info", "--db", str(db), "--json"]).output)
    groups = {(g["op"], g["backend"], g["hardware"]): g for g in data["groups"]}
    assert groups[("twice", "cpu", "laptop")]["candidates"] == 7
    assert groups[("twice", "cpu", "laptop")]["failed"] == 2
    assert groups[("twice", "cpu", "h200")]["best_ms"] == 0.5


def test_archive_info_of_an_empty_and_of_a_foreign_file(runner, tmp_path):
    empty = tmp_path / "empty.db"
    Archive(empty).close()
    result = invoke(runner, ["archive", "info", "--db", str(empty)])
    assert result.exit_code == 0 and "empty" in result.output
    text = tmp_path / "notes.db"
    text.write_text("just some notes\n" * 20)
    before = text.read_bytes()
    for args in (["archive", "info"], ["best", "twice", "-b", "cpu"], ["history", "twice"],
                 ["archive", "import", str(empty)], ["archive", "merge", str(empty)]):
        r = invoke(runner, [*args, "--db", str(text)])
        assert_one_paragraph_error(r, str(text), "not a kevolve archive")
    assert text.read_bytes() == before
    r = invoke(runner, ["archive", "info", "--db", str(tmp_path / "none.db")])
    assert_one_paragraph_error(r, "no archive at")


def test_archive_merge(runner, tmp_path, db):
    gpu = tmp_path / "gpu.db"
    fill(gpu, "h200", [0.5, 0.25, 0.75])
    r = invoke(runner, ["archive", "merge", str(gpu), "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert "added 3 results, 1 ceiling; skipped as already there: 1 op, 3 candidates" \
        in r.output
    r = invoke(runner, ["archive", "merge", str(gpu), "--db", str(db)])
    assert "added nothing new" in r.output
    best = json.loads(invoke(runner, ["best", "twice", "-b", "cpu", "--hardware", "h200",
                                      "--json", "--db", str(db)]).output)
    assert best["time_ms"] == 0.25
    fresh = tmp_path / "new" / "fresh.db"  # merging into a missing archive creates it
    assert invoke(runner, ["archive", "merge", str(gpu), "--db", str(fresh)]).exit_code == 0
    assert fresh.exists()
    r = invoke(runner, ["archive", "merge", str(tmp_path / "nope.db"), "--db", str(db)])
    assert_one_paragraph_error(r, "no archive to merge at", "nope.db")


def test_archive_export_import(runner, tmp_path, db):
    fill(db, "laptop", [9.0], name="thrice")
    out = tmp_path / "all.jsonl"
    r = invoke(runner, ["archive", "export", str(out), "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert "exported 2 ops, 8 candidates, 8 results, 1 ceiling" in r.output
    one = tmp_path / "one.jsonl"
    r = invoke(runner, ["archive", "export", str(one), "--op", "thrice", "--db", str(db)])
    assert "1 op, 1 candidate, 1 result" in r.output
    kinds = [json.loads(line)["kind"] for line in one.read_text().splitlines()]
    assert kinds == ["header", "op", "candidate", "result", "ceiling"]

    dst = tmp_path / "dst.db"
    r = invoke(runner, ["archive", "import", str(out), "--db", str(dst)])
    assert r.exit_code == 0, r.output
    assert "added 2 ops, 8 candidates, 8 results, 1 ceiling" in r.output
    r = invoke(runner, ["archive", "import", str(out), "--db", str(dst)])
    assert "added nothing new" in r.output
    a = json.loads(invoke(runner, ["history", "twice", "--json", "--db", str(db)]).output)
    b = json.loads(invoke(runner, ["history", "twice", "--json", "--db", str(dst)]).output)
    assert [(x["verdict"], x["time_ms"], x["best_ms"]) for x in a] == [
        (x["verdict"], x["time_ms"], x["best_ms"]) for x in b]


def test_archive_export_import_errors(runner, tmp_path, db):
    r = invoke(runner, ["archive", "export", str(tmp_path / "x.jsonl"), "--op", "zz", "--db",
                        str(db)])
    assert_one_paragraph_error(r, "no op named 'zz'")
    empty = tmp_path / "empty.db"
    Archive(empty).close()
    r = invoke(runner, ["archive", "export", str(tmp_path / "x.jsonl"), "--db", str(empty)])
    assert_one_paragraph_error(r, "is empty")
    assert not (tmp_path / "x.jsonl").exists()
    r = invoke(runner, ["archive", "export", str(tmp_path / "no" / "dir" / "x.jsonl"),
                        "--db", str(db)])
    assert_one_paragraph_error(r, "cannot write")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "op"}\n')
    r = invoke(runner, ["archive", "import", str(bad), "--db", str(db)])
    assert_one_paragraph_error(r, str(bad), "not a kevolve archive export")
    r = invoke(runner, ["archive", "import", str(tmp_path / "nope.jsonl"), "--db", str(db)])
    assert_one_paragraph_error(r, "no file to import")
