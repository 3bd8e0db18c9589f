"""Evaluation is hermetic: a candidate cannot change what a later candidate is judged on,
cannot leave work or faults behind for it, and a worker's death between candidates costs
nothing. Each test runs a kernel of the `faulty` backend that breaks one of these, then an
honest candidate after it in the same worker."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kevolve.evaluate.evaluator import Evaluator
from kevolve.evaluate.job import EvalJob
from kevolve.evaluate.worker import WorkerPool
from kevolve.ops import LIBRARY
from kevolve.schedule import default_trace
from kevolve.search import SearchConfig, evolve

SOFTMAX = LIBRARY["softmax"]
SMALL = SOFTMAX.shape("small")
BENCH = {"M": 64, "N": 256}
MEM_MB = 1500


def job(fault: str, bench=SMALL, checks=(), seeds=(0,), time_it=False, **opts) -> EvalJob:
    trace = default_trace(SOFTMAX.op_for(bench), SOFTMAX.dims(bench)).to_json()
    return EvalJob("softmax", "faulty", trace, bench, tuple(checks), tuple(seeds),
                   {"fault": fault, "threads": 1, **opts}, time=time_it, repeat=3, threads=1)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids, seconds: float = 120.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not [p for p in pids if alive(p)]:
            return []
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


# -- [high] a worker that dies while idle ----------------------------------------------

def test_a_worker_that_dies_while_idle_is_replaced_and_the_next_job_runs(faulty):
    with WorkerPool(1, timeout_s=600, mem_limit_mb=MEM_MB) as pool:
        ((_, first),) = pool.map([job("none")])
        assert first.ok, first.message
        pid = pool.slots[0].proc.pid
        os.kill(pid, signal.SIGKILL)  # dies between candidates, holding no job
        assert wait_gone([pid]) == []
        ((_, second),) = pool.map([job("none")])
        assert second.ok, second.message  # before: BrokenPipeError out of map
        assert pool.slots[0].proc.pid != pid


def test_a_search_whose_idle_workers_are_killed_spends_its_budget(faulty, tmp_path):
    """After each result every worker of the pool is killed while idle; the search still
    evaluates its whole budget and returns its summary (the CLI prints it as JSON)."""
    killed = []

    def kill_workers(m):
        for p in multiprocessing.active_children():  # the pool's workers, all idle now
            killed.append(p.pid)
            os.kill(p.pid, signal.SIGKILL)
        wait_gone(killed)

    cfg = SearchConfig("softmax", "faulty", budget=3, shape="small", db=str(tmp_path / "a.db"),
                       workers=1, threads=1, repeat=3, timeout_s=600, mem_limit_mb=MEM_MB,
                       backend_options={"fault": "none"})
    summ = evolve(cfg, callbacks=(kill_workers,))
    assert killed
    assert summ.evaluated + summ.reused == 3 and summ.evaluated >= 2, summ
    assert summ.failed == 0, dict(summ.failures)


# -- [high] a kernel that writes its inputs --------------------------------------------

def test_a_wrong_kernel_that_writes_its_inputs_is_named_and_poisons_nothing(faulty):
    ev = Evaluator()
    bad = ev.evaluate(job("wrong_modify_inputs", seeds=(0, 1)))
    assert bad.verdict == "correctness"
    assert "modified input 'x'" in bad.message, bad.message
    good = ev.evaluate(job("none", seeds=(0, 1)))  # same worker, same cached draw
    assert good.ok, good.message


def test_every_candidate_gets_inputs_no_earlier_candidate_touched(faulty):
    """The kept draw is never handed to a kernel: the next candidate's inputs equal a
    fresh draw even after a kernel wrote into its own."""
    import numpy as np

    from kevolve.evaluate.check import inputs_for

    ev = Evaluator()
    ev.evaluate(job("wrong_modify_inputs"))
    fresh = inputs_for(SOFTMAX.op_for(SMALL), SOFTMAX.case(SMALL, 0).inputs)
    for _case, kept in ev._cases.values():
        if kept["x"].shape == fresh["x"].shape:
            assert np.array_equal(kept["x"], fresh["x"])


# -- [high] a crash that surfaces after the kernel returned ----------------------------

def test_a_late_crash_is_blamed_on_the_candidate_that_caused_it(faulty):
    """The kernel returns the right answer, but a thread it started segfaults the process
    0.3 s later. The candidate is rejected for starting the thread, its worker retired, and
    the honest candidate after it is ok (before: the late candidate was ok and the next
    one was recorded as a crash)."""
    with WorkerPool(1, timeout_s=600, mem_limit_mb=MEM_MB) as pool:
        pid = pool.slots[0].proc.pid
        got = []
        for f in ("late_segfault", "none"):
            got += [r for _, r in pool.map([job(f)])]
            time.sleep(1.0)  # time for the late fault to fire (a bound, not a measure)
        late, honest = got
        assert not late.ok and "thread(s) started by the kernel call" in late.message
        assert late.diagnostics.get("retired") is True
        assert honest.ok, honest.message
        assert not alive(pid)


@pytest.mark.cuda
def test_a_pending_cuda_error_is_found_before_the_result_leaves():
    """An out-of-bounds index on the device raises asynchronously: the health check run
    before a result is sent reports it (the candidate is a crash and its worker replaced)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    code = ("import torch\nfrom kevolve.evaluate.hermetic import device_health\n"
            "x = torch.zeros(4, device='cuda')\n"
            "i = torch.tensor([1 << 40], device='cuda')\n"
            "y = x[i]\n"  # launched, not synchronized
            "print('HEALTH', device_health(True))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("HEALTH"))
    assert "None" not in line and ("CUDA" in line or "device-side" in line), out


# -- [medium] CPU timing cheats ---------------------------------------------------------

def test_a_kernel_that_finishes_its_work_on_a_thread_is_rejected(faulty):
    res = Evaluator().evaluate(job("thread_finish", bench=BENCH, time_it=True))
    assert not res.ok and "thread(s) started by the kernel call" in res.message, res
    assert res.diagnostics.get("retired") is True


def test_a_kernel_that_skips_repeated_calls_fails_without_the_roofline(faulty):
    """Outputs are poisoned before every timed call and checked after timing: the evaluator
    alone rejects it (before: ok with a near-zero time; only the search's roofline check
    at large sizes caught it)."""
    res = Evaluator().evaluate(job("skip_repeat", bench=BENCH, checks=(SMALL,), time_it=True))
    assert res.verdict == "correctness", res
    assert "after timing" in res.message and "NaN" in res.message


def test_a_kernel_that_replays_results_for_buffers_it_has_seen_fails(faulty):
    res = Evaluator().evaluate(job("memo_repeat", bench=BENCH, time_it=True))
    assert res.verdict == "correctness", res
    assert "new inputs were copied into the same buffers" in res.message


def test_the_honest_kernel_still_passes_every_new_check(faulty):
    ev = Evaluator()
    for time_it in (False, True):
        res = ev.evaluate(job("none", bench=BENCH, checks=(SMALL,), time_it=time_it))
        assert res.ok, res.message


# -- [medium] a kernel that holds the GIL forever ---------------------------------------

def test_a_kernel_holding_the_gil_is_stopped_by_the_timeout(faulty, tmp_path):
    with WorkerPool(1, timeout_s=15, mem_limit_mb=MEM_MB) as pool:
        ((_, hung), (_, after)) = list(pool.map([job("gil_hang", pid_dir=str(tmp_path)),
                                                 job("none")]))
        assert hung.verdict == "timeout" and "(stage: correctness)" in hung.message
        (marker,) = tmp_path.glob("hang.*")
        assert wait_gone([int(marker.name.split(".")[1])]) == []
        assert after.ok, after.message


PARENT = """
import sys
sys.path[:0] = {path!r}
from kevolve.evaluate.job import EvalJob
from kevolve.evaluate.worker import WorkerPool
job = EvalJob("softmax", "faulty", {trace!r}, {shape!r}, (), (0,),
              {{"fault": "gil_hang", "pid_dir": {pid_dir!r}}}, time=False, threads=1)
with WorkerPool(1, timeout_s=600) as pool:
    list(pool.map([job]))
"""


def test_a_kernel_holding_the_gil_dies_with_a_killed_search(faulty, tmp_path):
    """The worker's parent-watch thread cannot run while a kernel holds the GIL; the
    kernel's parent-death signal still kills it (before: it slept on for an hour)."""
    trace = default_trace(SOFTMAX.op, SOFTMAX.dims(SMALL)).to_json()
    code = PARENT.format(path=[p for p in sys.path if p], trace=trace, shape=SMALL,
                         pid_dir=str(tmp_path))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    parent = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        deadline = time.monotonic() + 600
        while not list(tmp_path.glob("hang.*")) and time.monotonic() < deadline:
            assert parent.poll() is None, "the pool's process ended early"
            time.sleep(0.1)
        (marker,) = tmp_path.glob("hang.*")
        worker = int(marker.name.split(".")[1])
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert wait_gone([worker], 30) == []
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
