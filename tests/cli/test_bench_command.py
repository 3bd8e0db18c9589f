"""`kevolve bench` on the CPU suite from an archive: the table, results.json with eager and
kevolve timed in interleaved rounds, the HTML report, and --top re-timing the archive's
fastest distinct kernels in the same run (the few fastest timed again in interleaved
rounds; the reported kernel is the fastest of those), each beside its archived time."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kevolve.archive import Archive
from kevolve.bench import suites
from kevolve.cli import main


@pytest.fixture(autouse=True)
def small_cpu_suite(monkeypatch):
    """The cpu suite benched at the `small` preset instead of its 4096 x 4096: what these
    tests check is the command (contenders, rounds, archive, report), not the kernels'
    speed, and the full size costs minutes of timing and float64 reference checks."""
    monkeypatch.setitem(suites.PRESET, "cpu", "small")


def test_bench_from_archive_retimes_the_top_contenders(tmp_path):
    db, out = tmp_path / "a.db", tmp_path / "out"
    r = CliRunner().invoke(main, ["evolve", "softmax", "--backend", "cpu", "--budget", "6",
                                  "--db", str(db), "--threads", "1", "--shape", "M=64",
                                  "--shape", "N=1024"])
    assert r.exit_code == 0, r.output
    with Archive(db, create=False) as a:
        tops = a.fastest("softmax", "cpu", None, 3)
    assert len(tops) >= 2
    hashes = {t.result.source_hash for t in tops}
    assert len(hashes) == len(tops)  # distinct generated code
    r = CliRunner().invoke(main, ["bench", "--suite", "cpu", "--ops", "softmax",
                                  "--from-archive", "--top", "3", "--rounds", "2", "--db", str(db),
                                  "--out", str(out), "--no-compile", "--threads", "1"])
    assert r.exit_code == 0, r.output
    assert "geomean x compile" in r.output and "softmax" in r.output
    assert "[1/1] softmax: kevolve " in r.stderr  # progress, piped: one line per op
    # archived at M=64, benched at the suite's shape: the command says so, and how to fix it
    assert f"softmax: {len(tops)} of the archive's times were measured on other" in r.output
    assert "--budget 0 --refresh N" in r.output
    res = json.loads((out / "results.json").read_text())
    (row,) = res["rows"]
    cont = row["contenders"]
    assert [c["candidate"] for c in cont] == [t.candidate_id for t in tops]
    assert all(c["verdict"] == "ok" and c["ms"] > 0 for c in cont), cont
    # the 3 fastest of one timing each were timed again in 2 interleaved rounds; the pick
    # is the fastest there, not necessarily the luckiest single timing
    finals = sorted(cont, key=lambda c: c["ms"])[:3]
    assert all(c["finalist_ms"] > 0 for c in finals)
    assert all(len(c["finalist_rounds_ms"]) == 2 and
               c["finalist_ms"] == pytest.approx(sum(c["finalist_rounds_ms"]) / 2) for c in finals)
    assert not any("finalist_ms" in c for c in cont if c not in finals)
    assert row["candidate"] == min(finals, key=lambda c: c["finalist_ms"])["candidate"]
    # beside each, its archived time, which the search measured at M=64: other code
    assert [c["archived_ms"] for c in cont] == [t.result.time_ms for t in tops]
    assert [c["same_code"] for c in cont] == [False] * len(tops)
    # and the hash of the code each was timed on here: the suite's shape, not the archive's
    here = [c["source_hash"] for c in cont]
    assert len(set(here)) == len(tops) and not set(here) & hashes
    assert row["kevolve_source_hash"] == next(c["source_hash"] for c in cont
                                              if c["candidate"] == row["candidate"])
    assert row["kevolve_archived_ms"] in [t.result.time_ms for t in tops]
    assert row["kevolve_verdict"] == "ok" and row["kevolve_ms"] > 0
    assert row["eager_ms"] > 0 and row["speedup_eager"] == row["eager_ms"] / row["kevolve_ms"]
    assert res["rounds"] == 2  # eager and kevolve timed in turn, twice
    assert row["kevolve_spread"] >= 0 and row["eager_spread"] >= 0
    for key in ("kevolve", "eager"):  # each round's time, in round order, behind both
        ts = row[f"{key}_rounds_ms"]
        assert len(ts) == 2 and row[f"{key}_ms"] == pytest.approx(sum(ts) / 2)
        assert row[f"{key}_spread"] == pytest.approx((max(ts) - min(ts)) / row[f"{key}_ms"])
    html = (out / "report.html").read_text()
    assert "softmax" in html and "<img" in html and "2 interleaved rounds" in html
    # both spreads, in %, beside the speedups (no torch.compile here: its is "-")
    assert "<th>spread compile / kevolve</th>" in html
    assert f"<td>- / {100 * row['kevolve_spread']:.1f}%</td>" in html
    assert f"<td>{row['speedup_eager']:.3f}</td>" in html
    # each round's times in a table of their own, not as columns of the main one
    assert "rounds ms" not in html and "<h2>Each round's times (ms)</h2>" in html
    cells = "".join(f"<td>{t:.4g}</td>" for t in row["kevolve_rounds_ms"])
    assert f"<td>softmax</td><td>kevolve</td>{cells}</tr>" in html


def test_op_db_times_one_op_from_its_own_archive(tmp_path):
    """--op-db OP=PATH: that op's contenders come from its own archive (a search kept apart),
    the others' from --db; the row names the archive. A bad value is refused by name."""
    own, out = tmp_path / "own.db", tmp_path / "out"
    r = CliRunner().invoke(main, ["evolve", "softmax", "--backend", "cpu", "--budget", "3",
                                  "--db", str(own), "--threads", "1", "--shape", "small"])
    assert r.exit_code == 0, r.output
    args = ["bench", "--suite", "cpu", "--ops", "softmax", "--from-archive", "--rounds", "1",
            "--db", str(tmp_path / "none.db"), "--out", str(out), "--no-compile",
            "--threads", "1"]
    r = CliRunner().invoke(main, args + ["--op-db", f"softmax={own}"])
    assert r.exit_code == 0, r.output
    (row,) = json.loads((out / "results.json").read_text())["rows"]
    with Archive(own, create=False) as a:
        best = a.fastest("softmax", "cpu", None, 1)[0]
    assert row["archive"] == "own.db" and row["searched"] == 3
    assert row["trace_source"] == "archive" and row["candidate"] == best.candidate_id
    r = CliRunner().invoke(main, args)  # without it: nothing archived, the default schedule
    (row,) = json.loads((out / "results.json").read_text())["rows"]
    assert row["trace_source"] == "default" and row["archive"] == "none.db"
    for bad, says in ((f"gemm_bias_gelu={own}", "not one of the ops benched"),
                      ("softmax", "give OP=PATH"), ("softmax=missing.db", "no such archive")):
        r = CliRunner().invoke(main, args + ["--op-db", bad])
        assert r.exit_code == 2 and says in r.output, r.output


def test_evolve_says_when_it_stopped_short_of_its_budget(tmp_path):
    """A proposer with nothing new for 4 rounds ends the search early: the summary and the
    command say so, and how to go on (here a replay file of one trace runs out)."""
    from kevolve import ops
    from kevolve.schedule import default_trace

    d = ops.get("softmax")
    t = default_trace(d.op_for("small"), d.dims("small")).to_dict()
    t["moves"] = [m for m in t["moves"] if m["m"] != "launch"] + [
        {"m": "launch", "num_warps": 2}]
    traces = tmp_path / "t.json"
    traces.write_text(json.dumps([t]))
    args = ["evolve", "softmax", "--backend", "cpu", "--budget", "5", "--shape", "small",
            "--proposer", "replay", "--traces", str(traces), "--threads", "1"]
    r = CliRunner().invoke(main, args + ["--db", str(tmp_path / "a.db")])
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    # the default evaluated; the replayed copy (identical code) reused, using no budget
    assert "stopped at 1 of 5: the proposer had nothing new for 4 rounds" in said
    assert "--resume with another --seed" in said
    r = CliRunner().invoke(main, args + ["--db", str(tmp_path / "b.db"), "--json"])
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["stalled"] is True and res["evaluated"] + res["reused"] == 2
