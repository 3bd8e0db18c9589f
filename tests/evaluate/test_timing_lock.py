"""The machine-wide timing lock: another kevolve process's timing waits for it, a killed
holder leaves it free, `off` turns it off, and a worker pool's timing takes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from kevolve.evaluate.job import EvalJob
from kevolve.evaluate.timing_lock import NodeTimingLock
from kevolve.evaluate.worker import WorkerPool
from kevolve.ops import LIBRARY
from kevolve.schedule import default_trace

HOLDER = """
import sys, time
from kevolve.evaluate.timing_lock import NodeTimingLock
lock = NodeTimingLock()
lock.acquire()
print("held", flush=True)
time.sleep(float(sys.argv[1]))
released = time.time()
lock.release()
print(released, flush=True)
"""


def hold(path, seconds: float) -> subprocess.Popen:
    """Another process holding the lock at `path` for `seconds`, once this returns."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(seconds)], stdout=subprocess.PIPE,
                         text=True, env={**os.environ, "KEVOLVE_TIMING_LOCK": str(path)})
    assert p.stdout.readline().strip() == "held"
    return p


def acquire_within(lock: NodeTimingLock, seconds: float) -> bool:
    """Whether `lock` is acquired within `seconds` (a thread tries; it is released after)."""
    got = threading.Event()

    def take():
        lock.acquire()
        got.set()
        lock.release()
    threading.Thread(target=take, daemon=True).start()
    return got.wait(seconds)


def test_a_second_process_times_only_after_the_holder_released(tmp_path, monkeypatch):
    path = tmp_path / "timing.lock"
    monkeypatch.setenv("KEVOLVE_TIMING_LOCK", str(path))
    p = hold(path, 1.0)
    lock = NodeTimingLock()
    lock.acquire()
    acquired = time.time()
    lock.release()
    released = float(p.stdout.readline())
    p.wait(timeout=30)
    assert acquired >= released


def test_a_holder_killed_with_sigkill_leaves_the_lock_free(tmp_path, monkeypatch):
    path = tmp_path / "timing.lock"
    monkeypatch.setenv("KEVOLVE_TIMING_LOCK", str(path))
    p = hold(path, 600)
    try:
        assert not acquire_within(NodeTimingLock(), 0.5)
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
    assert acquire_within(NodeTimingLock(), 30)


def test_off_turns_the_lock_off(tmp_path, monkeypatch):
    path = tmp_path / "timing.lock"
    p = hold(path, 600)
    try:
        monkeypatch.setenv("KEVOLVE_TIMING_LOCK", "off")
        assert NodeTimingLock().path is None
        assert acquire_within(NodeTimingLock(), 10)
    finally:
        p.kill()
        p.wait(timeout=30)


def test_locks_are_per_visible_device_set(tmp_path, monkeypatch):
    monkeypatch.delenv("KEVOLVE_TIMING_LOCK", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    a = NodeTimingLock().path
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert NodeTimingLock().path != a
    assert NodeTimingLock(tag="0").path == a


def test_a_pool_worker_waits_in_timing_while_another_process_holds_the_lock(tmp_path,
                                                                             monkeypatch):
    path = tmp_path / "timing.lock"
    monkeypatch.setenv("KEVOLVE_TIMING_LOCK", str(path))
    softmax = LIBRARY["softmax"]
    small = softmax.shape("small")
    trace = default_trace(softmax.op_for(small), softmax.dims(small)).to_json()
    job = EvalJob("softmax", "cpu", trace, small, (), (0,), {}, time=True, repeat=3,
                  threads=1)
    p = hold(path, 600)
    results = []
    with WorkerPool(1, timeout_s=600) as pool:
        t = threading.Thread(target=lambda: results.extend(pool.map([job])), daemon=True)
        t.start()
        try:
            deadline = time.monotonic() + 300
            while pool._stage_of(0) != "timing" and time.monotonic() < deadline:
                time.sleep(0.05)
            assert pool._stage_of(0) == "timing"
            t.join(1.0)
            assert t.is_alive() and not results  # waiting for the other process's lock
        finally:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
        t.join(300)
    ((_, res),) = results
    assert res.ok, res.message
