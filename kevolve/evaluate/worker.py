"""Isolated evaluation: each candidate runs in a worker process with a wall-clock timeout
and a resident-memory watchdog. A crash, hang or runaway allocation of one candidate is a
recorded failure; the worker is replaced and the search goes on.

Workers are persistent (imports and compiled kernels are reused) and start with `spawn`,
so a CUDA context or Triton's process-wide interpreter mode never leaks from the parent.
Timing takes a lock shared by all workers and by other kevolve processes on the machine
(`timing_lock`): one timing at a time on a device.

Each worker leads a process group of its own: killing a worker kills what it started too
(a hung compiler), and a worker whose parent died (`kill -9` of the search) kills its group
within a second instead of running a runaway kernel on. Workers report the stage they are
in through shared memory, so a crash, timeout or oom says where it happened.

A worker that died while idle (between candidates) is replaced before it is given the next
one, so its death costs nothing and is blamed on no one; a worker whose candidate left
something behind that could outlive the candidate (a thread, a pending device error; the
result says `retired`) is replaced after reporting it."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import wait

from .job import STAGES, EvalJob, Result
from .timing_lock import NodeTimingLock

ACK = "taken"
STICKY = ("CUDA error", "illegal memory access", "device-side assert", "unspecified launch")


class _SlotLock:
    """The pool's timing lock, marking in shared memory which slot holds it, so the parent
    can release it when it kills a worker mid-timing; then the machine-wide lock, so other
    kevolve processes on this machine do not time at once either (the OS releases that one
    when a killed worker dies)."""

    def __init__(self, lock, held, slot: int):
        self.lock, self.held, self.slot = lock, held, slot
        self.machine = NodeTimingLock()

    def acquire(self):
        self.lock.acquire()
        self.held[self.slot] = 1
        self.machine.acquire()

    def release(self):
        self.machine.release()
        self.held[self.slot] = 0
        self.lock.release()


def _die_with_parent() -> None:
    """Ask the kernel (Linux) to SIGKILL this process when its parent dies: it works while
    a kernel holds the GIL in an endless loop, when the watch thread below cannot run."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _isolate(grouped) -> None:
    """Lead a process group (the parent kills the whole group) and watch the parent: when it
    is gone, kill the group (or just exit, if this process could not lead one)."""
    parent = os.getppid()
    _die_with_parent()
    if os.getppid() != parent:  # it died before the request took hold
        os._exit(1)
    try:
        os.setpgid(0, 0)
        grouped.value = 1
    except (AttributeError, OSError):
        pass

    def watch():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                if os.getpgrp() == os.getpid():
                    os.killpg(os.getpid(), signal.SIGKILL)
                os._exit(1)

    threading.Thread(target=watch, name="kevolve-parent-watch", daemon=True).start()


def _worker_main(conn, lock, held, stage, grouped, slot: int, env: dict) -> None:
    _isolate(grouped)
    # What compilers print (Triton dumps a failed kernel's PTX to stdout) goes to stderr:
    # stdout is the search's, one JSON object with --json. Results travel over `conn`.
    # File descriptor 1 for what native code writes, sys.stdout for Python's prints.
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    os.environ.update(env)
    from .evaluator import Evaluator

    def on_stage(name: str) -> None:
        stage[slot] = STAGES.index(name) + 1 if name in STAGES else 0

    ev = Evaluator(_SlotLock(lock, held, slot), on_stage=on_stage)
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        conn.send(ACK)  # the job is taken: a death from now on is this job's
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
    grouped: object  # shared flag: the worker leads its own process group
    job: EvalJob | None = None
    taken: bool = False  # the worker acknowledged the job (it may have started on it)
    tries: int = 0  # workers found dead before taking this job
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
        self.stage = self.ctx.Array("b", self.n)  # 1 + index in STAGES; 0: not started
        self.slots: list[_Slot] = [self._start(i) for i in range(self.n)]

    def _start(self, i: int) -> _Slot:
        parent, child = self.ctx.Pipe()
        grouped = self.ctx.Value("b", 0)
        p = self.ctx.Process(target=_worker_main,
                             args=(child, self.lock, self.held, self.stage, grouped, i,
                                   self.env), daemon=True)
        p.start()
        child.close()
        return _Slot(p, parent, grouped)

    def _stage_of(self, i: int) -> str | None:
        k = self.stage[i]
        return STAGES[k - 1] if 0 < k <= len(STAGES) else None

    def _kill(self, s: _Slot) -> None:
        """SIGKILL the worker and everything in its process group (a compiler it started)."""
        try:
            if s.grouped.value:
                os.killpg(s.proc.pid, signal.SIGKILL)
                return
        except (ProcessLookupError, PermissionError):
            pass
        if s.proc.is_alive():
            s.proc.kill()

    def _replace(self, i: int) -> None:
        s = self.slots[i]
        self._kill(s)
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
            for i, s in enumerate(self.slots):
                if s.job is None and pending:
                    job = pending.pop(0)
                    s = self._give(i, job)
                    s.job, s.started, s.peak_mb, s.taken, s.tries = job, time.time(), 0.0, \
                        False, 0
            busy = [s for s in self.slots if s.job is not None]
            ready = wait([s.conn for s in busy] + [s.proc.sentinel for s in busy],
                         timeout=self.poll_s)
            for i, s in enumerate(self.slots):
                if s.job is None:
                    continue
                job = s.job
                res, died = None, False
                stage = self._stage_of(i)
                where = f" (stage: {stage})" if stage else ""
                diag = {"stage": stage} if stage else {}
                if s.conn in ready:
                    try:
                        msg = s.conn.recv()
                    except (EOFError, OSError):
                        msg = None
                    if msg == ACK:
                        s.taken = True
                        continue
                    if isinstance(msg, dict):
                        res = Result.from_dict(msg)
                    else:
                        res, died = self._died(s, where, diag), True
                elif s.proc.sentinel in ready or not s.proc.is_alive():
                    res, died = self._died(s, where, diag), True
                else:
                    res = self._watchdog(i, s, where, diag)
                if died and not s.taken and s.tries < 2:
                    # died before it took the job (while idle, or on its way): the job never
                    # ran there, so it goes to a fresh worker, blamed on no one
                    tries = s.tries + 1
                    self._replace(i)
                    s = self._give(i, job)
                    s.job, s.started, s.peak_mb, s.taken, s.tries = job, time.time(), 0.0, \
                        False, tries
                    continue
                if res is None:
                    continue
                s.job = None
                if res.verdict == "crash" or any(m in res.message for m in STICKY) or \
                        res.diagnostics.get("retired"):
                    self._replace(i)  # dead, poisoned (sticky CUDA error), or left threads
                yield job, res

    def _watchdog(self, i: int, s: _Slot, where: str, diag: dict) -> Result | None:
        """The oom or timeout result of a busy worker over its limits (killed), or None."""
        mb = rss_mb(s.proc.pid)
        s.peak_mb = max(s.peak_mb, mb)
        elapsed = time.time() - s.started
        res = None
        if mb > self.mem_limit_mb:
            shown = math.ceil(mb)  # over the limit as printed too (600.3 is not "600 MB")
            res = Result("oom", message=f"worker resident memory {shown} MB exceeded the "
                         f"{self.mem_limit_mb:.0f} MB limit{where}; killed",
                         diagnostics={**diag, "rss_mb": shown}, seconds=elapsed)
        elif elapsed > self.timeout_s:
            res = Result("timeout", message=f"no result after {elapsed:.0f} s "
                         f"(limit {self.timeout_s:.0f} s){where}; killed",
                         diagnostics=diag, seconds=elapsed)
        if res is not None:
            self._replace(i)
        return res

    def _give(self, i: int, job: EvalJob) -> _Slot:
        """Send a job to slot i's worker; one that died while idle is replaced first (or
        when the send finds it gone), so the job goes to a live worker."""
        for _ in range(2):
            s = self.slots[i]
            if s.proc.is_alive():
                self.stage[i] = 0
                try:
                    s.conn.send(job.to_dict())
                    return s
                except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
                    pass
            self._replace(i)
        s = self.slots[i]
        self.stage[i] = 0
        s.conn.send(job.to_dict())  # a fresh worker that cannot take a job: a real error
        return s

    def _died(self, s: _Slot, where: str = "", diag: dict | None = None) -> Result:
        s.proc.join(1)
        code = s.proc.exitcode
        try:
            why = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 \
                else f"exit code {code}"
        except ValueError:
            why = f"signal {-code}"
        return Result("crash", message=f"worker died during evaluation ({why}){where}",
                      diagnostics=dict(diag or {}), seconds=time.time() - s.started)

    def close(self) -> None:
        for s in self.slots:
            try:
                s.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        for s in self.slots:
            s.proc.join(2)
            if s.proc.is_alive():
                self._kill(s)
                s.proc.join(2)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
