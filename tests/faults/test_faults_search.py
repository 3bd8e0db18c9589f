"""Faults during a search: candidates that segfault, loop forever, allocate until killed,
or whose compiler hangs. Each is recorded with its verdict, the stage it was in and why;
the search finishes its budget; the archive stays consistent.

One search on the `faulty` backend holds them all: the backend picks each candidate's fault
from the plan's num_warps (a launch hint the CPU backend ignores), and a replay proposer
supplies the default trace with num_warps changed. Two workers, so the two hangs wait out
their timeout side by side."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from pathlib import Path

import pytest

from kevolve.archive import Archive
from kevolve.evaluate.evaluator import Evaluator
from kevolve.evaluate.job import EvalJob
from kevolve.evaluate.worker import WorkerPool
from kevolve.ops import LIBRARY
from kevolve.schedule import default_trace
from kevolve.search import SearchConfig, evolve

SOFTMAX = LIBRARY["softmax"]
SMALL = SOFTMAX.shape("small")
MEM_MB = 600
# num_warps -> the fault of that candidate (the default trace at "small" has 4: honest)
FAULTS = {2: "hang", 16: "compile_hang", 1: "segfault", 8: "oom", 32: "none"}


def trace_with_warps(w: int) -> dict:
    t = json.loads(default_trace(SOFTMAX.op, SOFTMAX.dims(SMALL)).to_json())
    for m in t["moves"]:
        if m["m"] == "launch":
            m["num_warps"] = w
    return t


def alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids, seconds: float = 120.0) -> list[int]:
    """The pids still running after they all went or `seconds` passed (a bound for a broken
    kill, not a measure: it returns as soon as they are gone)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


@pytest.fixture(scope="module")
def timeout_s(faulty) -> float:
    """The searches' per-candidate limit: the hangs wait it out, so short, but every honest
    candidate must finish within it, worker start included. So it scales with how long one
    honest evaluation in a fresh worker takes on this machine now (at least 10 s, five
    times that: the searches run two workers at once, on a machine that may be busy).
    That evaluation also builds the kernel that the honest candidates share."""
    trace = default_trace(SOFTMAX.op, SOFTMAX.dims(SMALL)).to_json()
    job = EvalJob("softmax", "faulty", trace, SMALL, tuple(SOFTMAX.edge_shapes), (0, 1, 2),
                  {"fault": "none"}, repeat=3, threads=1, baseline=True)
    t0 = time.monotonic()
    with WorkerPool(1, timeout_s=3600, mem_limit_mb=MEM_MB) as pool:
        ((_, res),) = pool.map([job])
    assert res.ok, res.message
    return float(max(10, math.ceil(5 * (time.monotonic() - t0))))


def check_consistent(db: Path, expect_candidates: int) -> list[sqlite3.Row]:
    """integrity_check ok; every candidate has at most one result per (hardware, backend);
    the counts add up. Returns the latest result of each candidate with its trace."""
    with Archive(db, create=False) as a:
        assert a.check() == ["ok"]
        info = a.info()
        (g,) = info["groups"]
        assert g["candidates"] == expect_candidates
        assert g["ok"] + g["failed"] == g["candidates"]
        assert info["unevaluated"] == 0
        assert info["counts"]["results"] == expect_candidates
    c = sqlite3.connect(db)
    c.row_factory = sqlite3.Row
    try:
        dup = c.execute("SELECT candidate_id, count(*) n FROM results GROUP BY candidate_id, "
                        "hardware, backend HAVING n > 1").fetchall()
        assert not dup, [tuple(r) for r in dup]
        return c.execute("SELECT r.*, c.trace_json FROM results r JOIN candidates c "
                         "ON c.id = r.candidate_id ORDER BY r.id").fetchall()
    finally:
        c.close()


def test_a_search_survives_crash_hang_oom_and_a_hung_compiler(faulty, tmp_path, timeout_s):
    traces = tmp_path / "traces.json"
    traces.write_text(json.dumps([trace_with_warps(w) for w in FAULTS]))
    pids = tmp_path / "pids"
    pids.mkdir()
    events = []
    cfg = SearchConfig(
        "softmax", "faulty", budget=1 + len(FAULTS), shape="small", db=str(tmp_path / "a.db"),
        proposer="replay", proposer_options={"path": str(traces)}, workers=2, threads=1,
        repeat=3, timeout_s=timeout_s, mem_limit_mb=MEM_MB,
        backend_options={"by_warps": {str(w): f for w, f in FAULTS.items()},
                         "pid_dir": str(pids)})
    summ = evolve(cfg, lambda kind, data: events.append(kind))

    assert summ.evaluated == cfg.budget  # the budget is finished despite four faults
    assert dict(summ.failures) == {"timeout": 2, "crash": 1, "oom": 1}
    assert summ.best is not None and summ.best.result.ok
    assert "stalled" not in events

    rows = check_consistent(tmp_path / "a.db", cfg.budget)
    by_fault = {}
    for r in rows:
        warps = next(m["num_warps"] for m in json.loads(r["trace_json"])["moves"]
                     if m["m"] == "launch")
        by_fault[FAULTS.get(warps, "default")] = r
    diag = {k: json.loads(r["diagnostics"]) for k, r in by_fault.items()}

    seg = by_fault["segfault"]
    assert seg["verdict"] == "crash" and "signal SIGSEGV" in seg["message"]
    assert diag["segfault"]["stage"] == "correctness"
    hang = by_fault["hang"]
    assert hang["verdict"] == "timeout" and f"limit {timeout_s:.0f} s" in hang["message"]
    assert diag["hang"]["stage"] == "correctness" and "(stage: correctness)" in hang["message"]
    oom = by_fault["oom"]
    assert oom["verdict"] == "oom" and f"{MEM_MB} MB limit" in oom["message"]
    assert diag["oom"]["stage"] == "correctness" and diag["oom"]["rss_mb"] > MEM_MB
    comp = by_fault["compile_hang"]
    assert comp["verdict"] == "timeout" and "(stage: compile)" in comp["message"]
    assert diag["compile_hang"]["stage"] == "compile"
    assert by_fault["default"]["verdict"] == "ok" and by_fault["none"]["verdict"] == "ok"

    # The hung "compiler" was killed with its worker (the worker leads a process group),
    # not left behind sleeping for an hour.
    (compiler,) = pids.glob("compiler.*")
    (hung,) = pids.glob("hang.*")  # and the worker stuck in the endless kernel is gone
    assert wait_gone([int(compiler.read_text()), int(hung.read_text())]) == []


def test_the_pool_replaces_a_dead_worker(faulty):
    trace = default_trace(SOFTMAX.op, SOFTMAX.dims(SMALL)).to_json()
    jobs = [EvalJob("softmax", "faulty", trace, SMALL, (), (0,), {"fault": f}, time=False,
                    threads=1) for f in ("segfault", "none")]
    with WorkerPool(1, timeout_s=600, mem_limit_mb=MEM_MB) as pool:
        first = pool.slots[0].proc.pid
        got = [r for _, r in pool.map(jobs)]
        assert [r.verdict for r in got] == ["crash", "ok"], [r.message for r in got]
        assert pool.slots[0].proc.pid != first and not alive(first)


def test_a_sticky_cuda_error_restarts_the_worker(faulty):
    """After an illegal memory access a CUDA context is poisoned for good: the candidate is
    recorded with the error and the next one runs in a fresh worker. An ordinary wrong
    answer keeps the worker."""
    trace = default_trace(SOFTMAX.op, SOFTMAX.dims(SMALL)).to_json()
    jobs = [EvalJob("softmax", "faulty", trace, SMALL, (), (0,), {"fault": f}, time=False,
                    threads=1) for f in ("nan", "sticky_cuda", "none")]
    with WorkerPool(1, timeout_s=600, mem_limit_mb=MEM_MB) as pool:
        pids = []
        got = []
        for job in jobs:
            pids.append(pool.slots[0].proc.pid)
            got += [r for _, r in pool.map([job])]
        pids.append(pool.slots[0].proc.pid)
        assert [r.verdict for r in got[:1]] == ["correctness"] and got[2].ok, got
        assert not got[1].ok and "illegal memory access" in got[1].message, got[1]
        assert pids[0] == pids[1]  # a wrong answer does not cost the worker
        assert pids[2] != pids[1] and not alive(pids[1])  # the poisoned one is gone
        assert pids[3] == pids[2]


PARENT = """
import sys
sys.path[:0] = {path!r}
from kevolve.evaluate.job import EvalJob
from kevolve.evaluate.worker import WorkerPool
job = EvalJob("softmax", "faulty", {trace!r}, {shape!r}, (), (0,),
              {{"fault": "hang", "pid_dir": {pid_dir!r}}}, time=False, threads=1)
with WorkerPool(1, timeout_s=600) as pool:
    list(pool.map([job]))
"""


def test_a_worker_whose_parent_was_killed_stops_its_runaway_kernel(faulty, tmp_path):
    """kill -9 of the process that owns the pool (the search) must not leave a worker
    spinning on a kernel that never ends: the worker watches its parent and kills its own
    process group when the parent is gone."""
    import signal
    import subprocess
    import sys

    trace = default_trace(SOFTMAX.op, SOFTMAX.dims(SMALL)).to_json()
    code = PARENT.format(path=[p for p in sys.path if p], trace=trace, shape=SMALL,
                         pid_dir=str(tmp_path))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    parent = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        deadline = time.monotonic() + 600  # only against a broken pool: returns at once
        while not list(tmp_path.glob("hang.*")) and time.monotonic() < deadline:
            assert parent.poll() is None, "the pool's process ended early"
            time.sleep(0.1)
        (marker,) = tmp_path.glob("hang.*")  # the worker is inside the endless kernel
        worker = int(marker.name.split(".")[1])
        assert alive(worker)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert wait_gone([worker]) == []
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_an_error_inside_the_evaluator_is_a_crash_result_not_a_dead_worker(faulty):
    """Anything the evaluator did not expect (here: the backend refuses its options) is a
    `crash` result that says what was raised; the worker process lives on."""
    trace = default_trace(SOFTMAX.op, SOFTMAX.dims(SMALL)).to_json()
    res = Evaluator().evaluate(EvalJob("softmax", "faulty", trace, SMALL, (), (0,),
                                       {"fault": "no-such-fault"}, time=False, threads=1))
    assert res.verdict == "crash"
    assert "evaluation raised ValueError: unknown fault 'no-such-fault'" in res.message
    assert res.diagnostics["stage"] == "legality"


def test_what_a_compiler_prints_in_a_worker_goes_to_stderr(faulty, tmp_path, capfd,
                                                            timeout_s):
    """Triton prints a failed kernel's PTX to stdout; in a worker that would land in the
    search's stdout, which `evolve --json` keeps for its one JSON object (the H200's gemm
    search wrote 51k lines of PTX there). Workers send it to stderr; the failure is
    recorded as a compile failure and the search goes on."""
    traces = tmp_path / "traces.json"
    traces.write_text(json.dumps([trace_with_warps(2)]))
    cfg = SearchConfig(
        "softmax", "faulty", budget=2, shape="small", db=str(tmp_path / "a.db"),
        proposer="replay", proposer_options={"path": str(traces)}, workers=1, threads=1,
        repeat=3, timeout_s=timeout_s, backend_options={"by_warps": {"2": "noisy_compile"}})
    summ = evolve(cfg)
    out, err = capfd.readouterr()
    assert dict(summ.failures) == {"compile": 1} and summ.best is not None
    assert "ptx of the failed kernel" not in out
    assert err.count("ptx of the failed kernel") == 200
