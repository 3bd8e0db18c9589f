"""Executors: where candidates are evaluated. Both yield `(job, Result)` as each finishes.

- `LocalExecutor` (= kevolve.evaluate.worker.WorkerPool): spawned worker processes on this
  machine, with a wall-clock timeout, a resident-memory watchdog and a shared timing lock.
- `RayExecutor` (extra `distributed`): one Ray task per evaluation on a Ray cluster, e.g. a
  fleet of GPU machines. Each task calls `kevolve.evaluate.evaluator.evaluate` on the job and
  returns the Result as a dict; it declares `num_gpus=1` when the backend needs a GPU, and
  is never retried (`max_retries=0`: a candidate that kills its worker is a result, not
  something to run again).

Timeouts: a task running longer than `timeout_s` is cancelled with `ray.cancel(force=True)`
(its worker process is killed) and yields Result("timeout"). The clock starts when the task
is submitted, and tasks are submitted only while the cluster has a free slot for them (its
GPUs, or its CPUs / `num_cpus`), so a task does not wait in Ray's queue on its own clock
(another workload on the same cluster can still delay it). A worker that dies (segfault,
`os._exit`, killed) yields Result("crash"); Ray's memory monitor killing a task yields
Result("oom"). There is no per-candidate resident-memory limit as in the local pool: Ray
only acts on memory pressure of the whole node.

One timing at a time per device: with `gpu=True` each task holds one whole GPU
(`num_gpus=1`), so no two tasks share a GPU. GPU tasks also run in a fresh worker process
each (`max_calls=1`), so a sticky CUDA error can never poison the next candidate. Tasks on
the same node take the machine-wide timing lock (`timing_lock`, an `flock` the OS releases
if the task is killed) around their timing runs, so timings never overlap each other, nor
those of other kevolve processes on the node; other tasks still
compile and check on the same cores while one times. To give every task a whole node
(nothing else runs beside a timing), pass `timing_exclusive=True`: each task then asks for
as many CPUs as the smallest node has (on a cluster of unequal CPU nodes, only the smallest
ones are exclusive).

A cluster the executor starts itself (no address) listens on 127.0.0.1 only: anyone who can
reach a Ray cluster can run code on it. Pass `host=` (or `_node_ip_address` in
`ray_init_kwargs`) to open it to a network on purpose.

`map` is reentrant: the search may call it again (to re-verify a candidate) while it is
still consuming an earlier call's results; each call yields only its own jobs.
"""

from __future__ import annotations

import os
import time
from typing import Protocol

from ..errors import MissingExtra
from .job import EvalJob, Result
from .timing_lock import NodeTimingLock
from .worker import WorkerPool


class Executor(Protocol):
    """Where jobs are evaluated: the search talks to one through these two verbs only."""

    def map(self, jobs: list[EvalJob]):
        """Evaluate jobs; yield (job, Result) as each finishes (any order)."""
        ...

    def close(self) -> None: ...

LocalExecutor = WorkerPool


def _ray():
    try:
        import ray
    except ImportError as e:
        raise MissingExtra("the ray executor needs Ray: pip install 'kevolve[distributed]'") \
            from e
    return ray


def evaluate_job(job: dict) -> dict:
    """The body of one Ray task: evaluate a job dict, return the Result as a dict."""
    from .evaluator import evaluate

    return evaluate(EvalJob(**job), timing_lock=NodeTimingLock()).to_dict()


def describe_node(backend: str, gpu: bool, threads: int | None = None,
                  ceilings: bool = False, options: dict | None = None) -> dict:
    """What a result measured on a worker node should be labelled with (and, on request,
    the node's measured ceilings). `options`: the backend's, as the search's jobs carry."""
    from ..backends.registry import get as get_backend
    from .hardware import hardware_name, measure_ceilings, toolchain

    be = get_backend(backend, **(options or {}))
    out = {"hardware": hardware_name(gpu, threads), "toolchain": toolchain(be),
           "cpu_count": os.cpu_count()}
    if ceilings:
        out["ceilings"] = measure_ceilings(gpu, threads)
    return out


class RayExecutor:
    def __init__(self, address: str | None = None, gpu: bool = False,
                 timeout_s: float = 300.0, env: dict | None = None,
                 num_cpus: float | None = None, ray_init_kwargs: dict | None = None,
                 timing_exclusive: bool = False, poll_s: float = 0.2,
                 host: str = "127.0.0.1"):
        ray = self.ray = _ray()
        self.gpu, self.timeout_s, self.poll_s = gpu, float(timeout_s), poll_s
        self.env = {str(k): str(v) for k, v in (env or {}).items()}
        self.started = False
        if not ray.is_initialized():
            kw = dict(ray_init_kwargs or {})
            if address:
                ray.init(address=address, **kw)
            else:
                kw.setdefault("include_dashboard", False)
                kw.setdefault("_node_ip_address", host)  # localhost unless told otherwise
                kw.setdefault("dashboard_host", host)
                ray.init(**kw)
            self.started = True
        cpus = float(num_cpus or 1)
        if timing_exclusive and not gpu:
            cpus = self._smallest_node_cpus()
        self.cpus_per_task = cpus
        opts: dict = {"max_retries": 0, "num_cpus": cpus}
        if gpu:
            opts.update(num_gpus=1, max_calls=1)
        if self.env:
            opts["runtime_env"] = {"env_vars": self.env}
        self._remote = ray.remote(evaluate_job).options(**opts)
        self._tasks: dict = {}  # ref -> (job, submitted at), submitted and not yet done
        self._done: dict = {}  # ref -> (job, Result), done, not yet yielded by its map call
        self._cap: tuple[int, float] | None = None

    # -- cluster ---------------------------------------------------------------------
    def _smallest_node_cpus(self) -> float:
        cpus = [n["Resources"].get("CPU", 0) for n in self.ray.nodes()
                if n.get("Alive") and n["Resources"].get("CPU")]
        return float(min(cpus)) if cpus else 1.0

    def capacity(self) -> int:
        """How many of these tasks the cluster can run at once (re-read every few seconds,
        as nodes join and leave)."""
        now = time.time()
        if self._cap is None or now - self._cap[1] > 5.0:
            res = self.ray.cluster_resources()
            n = res.get("GPU", 0) if self.gpu else res.get("CPU", 1) // self.cpus_per_task
            self._cap = (max(1, int(n)), now)
        return self._cap[0]

    def describe(self, backend: str, threads: int | None = None,
                 ceilings: bool = False, options: dict | None = None) -> dict:
        """Hardware name and toolchain (and with ceilings=True the measured copy bandwidth
        and matmul rate) as a worker node sees them: run there as a task, so a driver
        without a GPU labels GPU results correctly."""
        opts: dict = {"num_cpus": 0, "max_retries": 0}
        if self.gpu:
            opts["num_gpus"] = 1
        if self.env:
            opts["runtime_env"] = {"env_vars": self.env}
        f = self.ray.remote(describe_node).options(**opts)
        return self.ray.get(f.remote(backend, self.gpu, threads, ceilings, options),
                            timeout=self.timeout_s)

    # -- evaluation ------------------------------------------------------------------
    def map(self, jobs):
        pending = list(jobs)
        mine: list = []  # refs of this call, submitted and not yet yielded
        try:
            while pending or mine:
                cap = self.capacity()
                while pending and len(self._tasks) < cap:
                    job = pending.pop(0)
                    ref = self._remote.remote(job.to_dict())
                    self._tasks[ref] = (job, time.time())
                    mine.append(ref)
                for ref in [r for r in mine if r in self._done]:
                    mine.remove(ref)
                    yield self._done.pop(ref)
                if self._tasks:
                    self._step()
        finally:  # a caller that stops early: nothing of its own is left behind
            for ref in mine:
                if ref in self._tasks:
                    self.ray.cancel(ref, force=True)
                    del self._tasks[ref]
                self._done.pop(ref, None)

    def _step(self) -> None:
        """Wait a little for any task in flight (this call's or another's); record what
        finished and cancel what ran past the timeout."""
        ray = self.ray
        refs = list(self._tasks)
        ready, _ = ray.wait(refs, num_returns=1, timeout=self.poll_s)
        if ready:  # collect everything already finished, not just the first
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in ready:
            self._finish(ref, self._get(ref))
        now = time.time()
        for ref, (_job, t0) in list(self._tasks.items()):
            if now - t0 > self.timeout_s:
                ray.cancel(ref, force=True)
                self._finish(ref, Result("timeout", message=f"no result after {now - t0:.0f}"
                                         f" s (limit {self.timeout_s:.0f} s); the Ray task "
                                         "was cancelled", seconds=now - t0))

    def _finish(self, ref, res: Result) -> None:
        job, _ = self._tasks.pop(ref)
        self._done[ref] = (job, res)

    def _get(self, ref) -> Result:
        ray = self.ray
        t0 = self._tasks[ref][1]
        try:
            return Result.from_dict(ray.get(ref))
        except ray.exceptions.OutOfMemoryError as e:
            return Result("oom", message=_trim(f"Ray's memory monitor killed the task: {e}"),
                          seconds=time.time() - t0)
        except ray.exceptions.TaskCancelledError:
            return Result("timeout", message="the Ray task was cancelled",
                          seconds=time.time() - t0)
        except ray.exceptions.WorkerCrashedError as e:
            return Result("crash", message=_trim(f"the Ray worker died during evaluation "
                                                 f"({type(e).__name__}: {e})"),
                          seconds=time.time() - t0)
        except ray.exceptions.RayError as e:  # RayTaskError, NodeDiedError, ObjectLostError
            return Result("crash", message=_trim(f"{type(e).__name__}: {e}"),
                          seconds=time.time() - t0)

    def close(self) -> None:
        for ref in list(self._tasks):
            self.ray.cancel(ref, force=True)
        self._tasks.clear()
        if self.started and self.ray.is_initialized():
            self.ray.shutdown()
        self.started = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _trim(text: str, limit: int = 1500) -> str:
    return text if len(text) <= limit else text[: limit // 3] + "\n...\n" + text[-2 * limit // 3:]
