"""Isolated evaluation: each candidate runs in a worker process with a wall-clock timeout
and a resident-memory watchdog. A crash, hang or runaway allocation of one candidate is a
recorded failure; the worker is replaced and the search goes on.

Workers are persistent (imports and compiled kernels are reused) and start with `spawn`,
so a CUDA context or Triton's process-wide interpreter mode never leaks from the parent.
Timing takes a lock shared by all workers: one timing at a time on a device."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from dataclasses import dataclass, field
from multiprocessing.connection import wait

from .types import EvalJob, Result

STICKY = ("CUDA error", "illegal memory access", "device-side assert", "unspecified launch")


class _SlotLock:
    """The shared timing lock, marking in shared memory which slot holds it, so the parent
    can release it when it kills a worker mid-timing."""

    def __init__(self, lock, held, slot: int):
        self.lock, self.held, self.slot = lock, held, slot

    def acquire(self):
        self.lock.acquire()
        self.held[self.slot] = 1

    def release(self):
        self.held[self.slot] = 0
        self.lock.release()


def _worker_main(conn, lock, held, slot: int, env: dict) -> None:
    os.environ.update(env)
    from .evaluate import Evaluator

    ev = Evaluator(_SlotLock(lock, held, slot))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        job = EvalJob(**msg)
        res = ev.evaluate(job)
        conn.send(res.to_dict())


def rss_mb(pid: int) -> float:
    """Resident memory of a process (Linux /proc), 0 if unknown."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class _Slot:
    proc: mp.Process
    conn: object
    job: EvalJob | None = None
    started: float = 0.0
    peak_mb: float = 0.0
    extra: dict = field(default_factory=dict)


class WorkerPool:
    """`map(jobs)` yields (job, Result) as workers finish, in any order."""

    def __init__(self, workers: int = 1, timeout_s: float = 300.0, mem_limit_mb: float = 8192,
                 env: dict | None = None, poll_s: float = 0.1):
        self.ctx = mp.get_context("spawn")
        self.lock = self.ctx.Lock()
        self.n, self.timeout_s, self.mem_limit_mb = max(1, workers), timeout_s, mem_limit_mb
        # Kernels (system libgomp) and torch (its own OpenMP) time in one process: spinning
        # idle threads of one runtime starve the other on small machines, so idle threads
        # sleep. Set before either runtime loads (workers are spawned fresh).
        self.env = {"OMP_WAIT_POLICY": "PASSIVE", **(env or {})}
        self.poll_s = poll_s
        self.held = self.ctx.Array("b", self.n)
        self.slots: list[_Slot] = [self._start(i) for i in range(self.n)]

    def _start(self, i: int) -> _Slot:
        parent, child = self.ctx.Pipe()
        p = self.ctx.Process(target=_worker_main,
                             args=(child, self.lock, self.held, i, self.env), daemon=True)
        p.start()
        child.close()
        return _Slot(p, parent)

    def _replace(self, i: int) -> None:
        s = self.slots[i]
        if s.proc.is_alive():
            s.proc.kill()
        s.proc.join(5)
        try:
            s.conn.close()
        except OSError:
            pass
        if self.held[i]:  # killed while timing: give the timing lock back
            self.held[i] = 0
            self.lock.release()
        self.slots[i] = self._start(i)

    def map(self, jobs):
        pending = list(jobs)
        while pending or any(s.job is not None for s in self.slots):
            for s in self.slots:
                if s.job is None and pending:
                    s.job, s.started, s.peak_mb = pending.pop(0), time.time(), 0.0
                    s.conn.send(s.job.to_dict())
            busy = [s for s in self.slots if s.job is not None]
            ready = wait([s.conn for s in busy] + [s.proc.sentinel for s in busy],
                         timeout=self.poll_s)
            for i, s in enumerate(self.slots):
                if s.job is None:
                    continue
                job = s.job
                res = None
                if s.conn in ready:
                    try:
                        res = Result.from_dict(s.conn.recv())
                    except (EOFError, OSError):
                        res = self._died(s)
                elif s.proc.sentinel in ready or not s.proc.is_alive():
                    res = self._died(s)
                else:
                    mb = rss_mb(s.proc.pid)
                    s.peak_mb = max(s.peak_mb, mb)
                    elapsed = time.time() - s.started
                    if mb > self.mem_limit_mb:
                        res = Result("oom", message=f"worker resident memory {mb:.0f} MB "
                                     f"exceeded the {self.mem_limit_mb:.0f} MB limit; killed",
                                     seconds=elapsed)
                    elif elapsed > self.timeout_s:
                        res = Result("timeout", message=f"no result after {elapsed:.0f} s "
                                     f"(limit {self.timeout_s:.0f} s); killed",
                                     seconds=elapsed)
                    if res is not None:
                        self._replace(i)
                if res is None:
                    continue
                s.job = None
                if res.verdict == "crash" or any(m in res.message for m in STICKY):
                    self._replace(i)  # a dead or poisoned (sticky CUDA error) worker
                yield job, res

    def _died(self, s: _Slot) -> Result:
        s.proc.join(1)
        code = s.proc.exitcode
        why = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 \
            else f"exit code {code}"
        return Result("crash", message=f"worker died during evaluation ({why})",
                      seconds=time.time() - s.started)

    def close(self) -> None:
        for s in self.slots:
            try:
                s.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        for s in self.slots:
            s.proc.join(2)
            if s.proc.is_alive():
                s.proc.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
