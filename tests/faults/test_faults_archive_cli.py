"""`kevolve evolve` as a user runs it, under faults of the archive: killed with SIGKILL
mid-run and resumed; two processes on one archive at once; a corrupt or foreign file.

Subprocesses run `python -m kevolve.cli evolve softmax --backend cpu --shape small`; the
tests wait on the archive's contents (never on wall-clock guesses) before acting."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kevolve.archive import Archive
from kevolve.cli import main

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
WAIT_S = 600  # a bound against a hang, not a measure: the waits end on events


def evolve_cmd(db: Path, *args: str) -> list[str]:
    # (--confirm 0 --duel 0: re-timing the leaders adds deliberate second results, and these
    # tests hold the archive to one result per candidate: nothing evaluated twice after a
    # kill)
    return [sys.executable, "-m", "kevolve.cli", "evolve", "softmax", "--backend", "cpu",
            "--shape", "small", "--threads", "1", "--db", str(db), "--json", "--confirm", "0",
            "--duel", "0", *args]


def read(db: Path, sql: str, args=()) -> list[tuple]:
    """Read a live archive without writing to it (WAL readers never block writers)."""
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return c.execute(sql, args).fetchall()
    finally:
        c.close()


def count_results(db: Path) -> int:
    try:
        return read(db, "SELECT count(*) FROM results")[0][0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def wait_for(pred, proc: subprocess.Popen | None = None, what: str = "") -> None:
    deadline = time.monotonic() + WAIT_S
    while not pred():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended (rc {proc.returncode}) before {what}: "
                                 f"{proc.stderr.read() if proc.stderr else ''}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def results(db: Path) -> list[tuple]:
    return read(db, "SELECT id, candidate_id, hardware, backend, verdict, time_ms, created "
                    "FROM results ORDER BY id")


def best_ms(rows) -> float:
    return min(r[5] for r in rows if r[4] == "ok" and r[5] is not None)


def one_result_per_candidate(db: Path) -> None:
    dup = read(db, "SELECT candidate_id, hardware, backend, count(*) n FROM results "
                   "GROUP BY candidate_id, hardware, backend HAVING n > 1")
    assert dup == [], f"candidates evaluated twice: {dup}"


def test_kill_9_mid_run_then_resume(tmp_path):
    db = tmp_path / "a.db"
    proc = subprocess.Popen(evolve_cmd(db, "--budget", "40"), cwd=tmp_path, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: count_results(db) >= 4, proc, "4 results")
        kids = children(proc.pid)
        assert kids, "the search runs its candidates in worker processes"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    # no worker outlives the search for long (each watches its parent)
    deadline = time.monotonic() + 30
    while any(alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(k) for k in kids)

    before = results(db)
    with Archive(db, create=False) as a:
        assert a.check() == ["ok"]
    one_result_per_candidate(db)
    in_flight = read(db, "SELECT id FROM candidates c WHERE NOT EXISTS "
                         "(SELECT 1 FROM results r WHERE r.candidate_id = c.id)")
    assert len(in_flight) <= 1  # one worker: at most one candidate was being evaluated
    best_before = best_ms(before)

    total = len(before) + 4
    out = subprocess.run(evolve_cmd(db, "--resume", "--budget", str(total)), cwd=tmp_path,
                         env=ENV, capture_output=True, text=True, timeout=WAIT_S)
    assert out.returncode == 0, out.stderr
    summ = json.loads(out.stdout)
    after = results(db)
    assert after[: len(before)] == before  # nothing that was committed is lost or changed
    one_result_per_candidate(db)  # nothing evaluated twice, the in-flight one included
    # the budget is spent; a proposal whose code was already measured reuses that result
    # (its own row, no budget), so there may be more rows than the budget
    assert len(after) >= total and summ["evaluated"] + summ["reused"] >= total - len(before)
    # the one in flight at the kill lost its evaluation; --resume evaluated it first
    assert read(db, "SELECT count(*) FROM candidates c WHERE NOT EXISTS (SELECT 1 FROM "
                    "results r WHERE r.candidate_id = c.id)") == [(0,)]
    if in_flight:
        first_new = after[len(before)]
        assert first_new[1] == in_flight[0][0]
    assert summ["best_time_ms"] <= best_before  # best so far unchanged or better
    with Archive(db, create=False) as a:
        assert a.check() == ["ok"]


def test_two_evolve_processes_on_one_archive(tmp_path):
    """Both progress and the file stays sound. Their thread counts differ, so their results
    land under two hardware names (cpu:...:1t and :2t) and each side's count is known;
    the ops and candidates tables (the default trace, seeds of one another) are shared."""
    db = tmp_path / "shared.db"
    budgets = {"1": 6, "2": 5}
    procs = {t: subprocess.Popen(
        [sys.executable, "-m", "kevolve.cli", "evolve", "softmax", "--backend", "cpu",
         "--shape", "small", "--threads", t, "--db", str(db), "--json", "--budget", str(b),
         "--seed", t, "--confirm", "0", "--duel", "0"], cwd=tmp_path, env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for t, b in budgets.items()}
    outs = {}
    try:
        for t, p in procs.items():
            stdout, stderr = p.communicate(timeout=WAIT_S)
            assert p.returncode == 0, stderr
            outs[t] = json.loads(stdout)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    with Archive(db, create=False) as a:
        assert a.check() == ["ok"]
        info = a.info()
    assert info["counts"]["ops"] == 1
    per_hw = {g["hardware"]: g for g in info["groups"]}
    for t, b in budgets.items():
        summ = outs[t]
        assert summ["evaluated"] + summ["reused"] == b
        assert per_hw[summ["hardware"]]["candidates"] == b  # both made progress
    one_result_per_candidate(db)


def _text(path: Path) -> None:
    path.write_text("these are my notes, not an archive\n" * 10)


def _foreign(path: Path) -> None:
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    c.execute("INSERT INTO users (name) VALUES ('ada')")
    c.commit()
    c.close()


def _archive_with_results(path: Path) -> None:
    from kevolve.evaluate.job import Result
    from kevolve.ops import LIBRARY
    from kevolve.schedule import default_trace

    d = LIBRARY["softmax"]
    with Archive(path) as a:
        oid = a.op_id(d.op)
        for k in range(200):
            t = json.loads(default_trace(d.op, d.dims("small")).to_json())
            t["decisions"] = {"$k": k}
            cid, _ = a.add_candidate(oid, json.dumps(t))
            a.add_result(cid, "hw", "cpu", {}, Result("ok", time_ms=1.0 + k, message="x" * 200))


def _truncated(path: Path) -> None:
    _archive_with_results(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _scribbled(path: Path) -> None:
    """A sound header over pages of garbage: only reading the pages finds it."""
    _archive_with_results(path)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for p in range(3, len(data) // page):
        data[p * page + 8: p * page + 72] = b"\xff" * 64
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("make, what", [
    (_text, "not an SQLite database"),
    (_foreign, "another application"),
    (_truncated, "truncated"),
    (_scribbled, "corrupt"),
], ids=["text", "foreign-sqlite", "truncated", "corrupt-pages"])
@pytest.mark.parametrize("resume", [False, True], ids=["new", "resume"])
def test_a_corrupt_or_foreign_archive_is_refused_and_left_alone(tmp_path, make, what, resume):
    db = tmp_path / "a.db"
    make(db)
    before, mtime = db.read_bytes(), db.stat().st_mtime_ns
    siblings = sorted(p.name for p in tmp_path.iterdir())
    args = ["evolve", "softmax", "--backend", "cpu", "--shape", "small", "--budget", "1",
            "--threads", "1", "--db", str(db)] + (["--resume"] if resume else [])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("kevolve: error:") and "\n" not in err and "Traceback" not in err
    assert str(db) in err and what in err, err
    assert db.read_bytes() == before and db.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in tmp_path.iterdir()) == siblings  # no -wal, no -shm
