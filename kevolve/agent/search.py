"""The evolve loop: propose -> dedupe -> evaluate (in workers) -> archive -> repeat.

The population is a MAP-Elites grid over schedule features (reduction strategy, fusion
degree, tile class, warps, splits): each niche keeps its fastest correct trace, parents
come from the global best and from random elites. Every candidate and result goes to the
SQLite archive as it happens, so a killed search resumes with nothing lost but what was
in flight. Candidates whose generated code is identical to one already measured on this
hardware (moves that commute or change nothing) reuse that result instead of running.

Archived times describe the code that ran then: a newer kevolve, backend template or
toolchain may generate other code for the same trace. A result whose run hash differs from
the one the trace would get now is stale; the fastest stale results are measured again
before the search proposes anything, so parents and the archive's best are current.

Too good to be true: a time below the roofline floor (the bytes the op must move at the
measured copy bandwidth, its FLOPs at the measured matmul rate) is not believed. Such a
candidate is checked at the full benchmark shape and timed again; it counts only if the
new time is no longer below the floor, else it is recorded as `suspicious`."""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace

from .. import pipeline
from ..archive import DEFAULT_PATH as DEFAULT_DB  # the archive's one default
from ..archive import RunKey, reused
from ..errors import KevolveError, UnknownName
from ..ir.printer import op_text
from ..schedule import MoveError, Trace, default_trace
from .types import EvalJob, ProposalContext, Result, Scored


@dataclass(frozen=True)
class SearchConfig:
    op: str
    backend: str
    budget: int = 64  # candidates evaluated (this run; with resume: in total)
    minutes: float | None = None
    proposer: str = "heuristic"
    proposer_options: dict = field(default_factory=dict)
    workers: int = 1
    executor: str = "local"
    address: str | None = None  # ray cluster
    db: str = DEFAULT_DB
    resume: bool = False
    seed: int = 0
    shape: str | None = None  # preset (default: cpu on CPU backends, gpu on GPU ones)
    shape_overrides: dict = field(default_factory=dict)
    threads: int | None = None
    timeout_s: float = 300.0
    mem_limit_mb: float = 8192.0
    backend_options: dict = field(default_factory=dict)
    top_k: int = 4  # a candidate faster than the k-th best is verified at the bench shape
    refresh: int = 4  # of the k fastest archived results, the stale ones are measured again
    repeat: int = 15
    # A time below roofline_slack x the roofline floor is suspicious (0 turns the check
    # off). It applies when the op moves at least roofline_min_bytes (None: any amount on
    # GPUs, whose timing flushes L2; on CPUs, 4x the last-level cache, since CPU timing
    # reuses cache-resident inputs).
    roofline_slack: float = 0.9
    roofline_min_bytes: int | None = None


STALL_ROUNDS = 4  # rounds in a row without a proposal that end a search short of its budget


@dataclass
class Summary:
    op: str
    backend: str
    hardware: str
    evaluated: int = 0
    failed: int = 0
    failures: Counter = field(default_factory=Counter)
    reused: int = 0  # identical generated code: result reused, not re-run
    skipped: Counter = field(default_factory=Counter)  # proposals over the device's limits
    remeasured: int = 0  # stale results measured again (not counted in evaluated)
    remeasure_failed: int = 0  # of those, the ones that no longer pass
    best: Scored | None = None
    baseline_ms: float | None = None  # torch eager, timed in this run (never the archive's)
    paired_ms: float | None = None  # the best schedule, timed in the job that timed eager
    default_ms: float | None = None
    best_so_far: list = field(default_factory=list)  # (index, best time) per evaluation
    seconds: float = 0.0
    stalled: bool = False  # stopped before the budget: the proposer had nothing new

    @property
    def speedup(self) -> float | None:
        """torch eager over the best schedule, both timed side by side in this run."""
        if self.paired_ms and self.baseline_ms:
            return self.baseline_ms / self.paired_ms
        if self.best and self.best.result.time_ms and self.baseline_ms:
            return self.baseline_ms / self.best.result.time_ms
        return None

    def to_json(self) -> dict:
        b = self.best
        return {"op": self.op, "backend": self.backend, "hardware": self.hardware,
                "evaluated": self.evaluated, "failed": self.failed,
                "failures": dict(self.failures), "reused": self.reused,
                "skipped": dict(self.skipped), "remeasured": self.remeasured,
                "remeasure_failed": self.remeasure_failed,
                "best_time_ms": b.result.time_ms if b else None,
                "baseline_ms": self.baseline_ms, "paired_ms": self.paired_ms,
                "default_ms": self.default_ms,
                "speedup": self.speedup,
                "best_trace": json.loads(b.trace_json) if b else None,
                "best_candidate": b.candidate_id if b else None,
                "best_so_far": self.best_so_far, "seconds": self.seconds,
                "stalled": self.stalled}


class Population:
    """MAP-Elites: the fastest correct trace per feature niche."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.elites: dict[tuple, Scored] = {}
        self.all_ok: list[Scored] = []

    def add(self, s: Scored) -> None:
        if not s.result.ok or s.result.time_ms is None:
            return
        from .proposers.mutations import features
        self.all_ok.append(s)
        key = features(Trace.from_json(s.trace_json))
        cur = self.elites.get(key)
        if cur is None or s.result.time_ms < cur.result.time_ms:
            self.elites[key] = s

    @property
    def best(self) -> Scored | None:
        return min(self.elites.values(), key=lambda s: s.result.time_ms, default=None)

    def drop(self, cand: int) -> None:
        """Forget a candidate's result (it is being measured again): its niche falls back
        to the next fastest trace there."""
        from .proposers.mutations import features
        gone = [s for s in self.all_ok if s.candidate_id == cand]
        if not gone:
            return
        self.all_ok = [s for s in self.all_ok if s.candidate_id != cand]
        key = features(Trace.from_json(gone[0].trace_json))
        rest = [s for s in self.all_ok if features(Trace.from_json(s.trace_json)) == key]
        if rest:
            self.elites[key] = min(rest, key=lambda s: s.result.time_ms)
        else:
            self.elites.pop(key, None)

    def kth_time(self, k: int) -> float:
        ts = sorted(s.result.time_ms for s in self.all_ok)
        return ts[k - 1] if len(ts) >= k else float("inf")

    def parents(self, n: int) -> tuple[Scored, ...]:
        elites = sorted(self.elites.values(), key=lambda s: s.result.time_ms)
        if not elites:
            return ()
        out = [elites[0]]
        while len(out) < n + 1 and len(out) < len(elites) + 1:
            out.append(self.rng.choice(elites))
        return tuple(out)


def floor_ms(result: Result, ceilings: dict) -> float | None:
    """The roofline floor of a result's op at its bench shape, in ms: the larger of its
    floor bytes at the copy ceiling and its floor FLOPs at the matmul ceiling (from the
    result's diagnostics); None when neither is known."""
    d = result.diagnostics or {}
    parts = []
    for need, rate in (("floor_bytes", "copy_bytes_per_s"), ("floor_flops", "matmul_flops")):
        n, r = d.get(need), ceilings.get(rate)
        if isinstance(n, (int, float)) and isinstance(r, (int, float)) and n > 0 and r > 0:
            parts.append(n / r)
    return max(parts) * 1e3 if parts else None


def suspicious(result: Result, ceilings: dict, slack: float = 0.9, min_bytes: int = 0) -> bool:
    """True when an ok result's median time is below `slack` x its roofline floor: faster
    than the hardware can move its bytes or do its FLOPs. Ops that move fewer than
    `min_bytes` (cache-resident on the timing machine) are never suspicious."""
    if not result.ok or result.time_ms is None or slack <= 0:
        return False
    if (result.diagnostics or {}).get("floor_bytes", 0) < min_bytes:
        return False
    fl = floor_ms(result, ceilings)
    return fl is not None and result.time_ms < slack * fl


def last_level_cache_bytes() -> int:
    """Bytes of last-level cache on this machine (all instances), the larger of what sysfs
    and sysconf say; 256 MiB when neither says."""
    import glob

    level, seen = 0, {}
    for d in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*"):
        try:
            with open(f"{d}/type") as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(f"{d}/level") as f:
                lv = int(f.read())
            with open(f"{d}/size") as f:
                size = f.read().strip()
            with open(f"{d}/shared_cpu_list") as f:
                shared = f.read().strip()
        except (OSError, ValueError):
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
        nbytes = int(size.rstrip("KMG") or 0) * mult
        if lv > level:
            level, seen = lv, {}
        if lv == level:
            seen[shared] = nbytes
    total = sum(seen.values())
    try:
        total = max(total, int(os.sysconf("SC_LEVEL3_CACHE_SIZE")))
    except (ValueError, OSError, AttributeError):
        pass
    return total if total > 0 else 256 << 20


def _in_flight(arch, op_id: int) -> list[tuple[str, str, int | None]]:
    """(trace, note, parent) of this op's candidates with no result anywhere: those a killed
    search was evaluating. (Another search running on the archive right now may be
    evaluating them too; then both record a result.)"""
    return [(trace, note or "in flight when a search stopped", parent)
            for trace, note, parent in arch.in_flight(op_id)]


def run_hash(source_hash: str, backend: str, toolchain: dict, hardware: str) -> str:
    return RunKey(source_hash, backend, toolchain, hardware).stable_hash()


class Search:
    def __init__(self, cfg: SearchConfig, on_event=None):
        from ..backends.registry import get as get_backend
        from ..ops import LIBRARY
        from .hardware import hardware_name, toolchain

        self.cfg, self.on_event = cfg, on_event or (lambda *a: None)
        if cfg.op not in LIBRARY:
            raise UnknownName(f"evolve needs a library op with input generators; "
                           f"{cfg.op!r} is not one (see `kevolve ops`)")
        self.opdef = LIBRARY[cfg.op]
        self.backend = get_backend(cfg.backend, **cfg.backend_options)
        self.gpu = self.backend.target.on_device
        preset = cfg.shape or ("gpu" if self.gpu else "cpu")
        self.bench_shape = {**self.opdef.shape(preset), **cfg.shape_overrides}
        self.op = self.opdef.op_for(self.bench_shape)
        self.bench_dims = self.opdef.dims(self.bench_shape)
        small = {**self.opdef.shape("small")}
        if "dtype" in self.bench_shape:
            small["dtype"] = self.bench_shape["dtype"]
        self.check_shapes = (small,) + tuple(
            {**e, **({"dtype": self.bench_shape["dtype"]} if "dtype" in self.bench_shape
                     else {})} for e in self.opdef.edge_shapes)
        self.threads = cfg.threads or (None if self.gpu else os.cpu_count())
        self.hardware = hardware_name(self.gpu, self.threads)
        self.toolchain = toolchain(self.backend)
        self.rng = random.Random(cfg.seed)
        self.default_json = default_trace(self.op, self.bench_dims).to_json()
        self.ceilings: dict = {}
        # The roofline check needs measured times (not an emulator's estimate).
        self.roofline_slack = cfg.roofline_slack if self.backend.target.measured else 0.0
        self.roofline_min_bytes = cfg.roofline_min_bytes if cfg.roofline_min_bytes is not None \
            else 0 if self.gpu else max(64 << 20, 4 * last_level_cache_bytes())

    def floor_ceilings(self) -> dict:
        """The ceilings a time is held against: on a CPU measured with the kernels' threads
        (hardware.measure_ceilings), so used as they are."""
        return dict(self.ceilings)

    def suspicion(self, res: Result) -> str | None:
        """Why a result is too good to be true, or None."""
        c = self.floor_ceilings()
        if not suspicious(res, c, self.roofline_slack, self.roofline_min_bytes):
            return None
        d, fl = res.diagnostics, floor_ms(res, c)
        return (f"{res.time_ms:.4g} ms is below {self.roofline_slack:g} x the roofline floor "
                f"{fl:.4g} ms ({d.get('floor_bytes')} bytes at "
                f"{c.get('copy_bytes_per_s', 0) / 1e9:.4g} GB/s, {d.get('floor_flops')} FLOP at "
                f"{c.get('matmul_flops', 0) / 1e9:.4g} GFLOP/s): faster than the hardware allows")

    # -- pieces ------------------------------------------------------------------------
    def job(self, trace_json: str, cand: int | None, baseline: bool, verify: bool,
            time_it: bool = True) -> EvalJob:
        opts = dict(self.cfg.backend_options)
        if self.backend.target.host_threads and self.threads:
            opts.setdefault("threads", self.threads)
        return EvalJob(self.cfg.op, self.cfg.backend, trace_json, self.bench_shape,
                       () if verify else self.check_shapes, (0, 1, 2), opts,
                       check_bench_shape=verify, time=time_it, repeat=self.cfg.repeat,
                       threads=self.threads, baseline=baseline, candidate_id=cand)

    def render_hash(self, trace: Trace) -> tuple[str | None, Result | None]:
        """Lower and render in this process (cheap): the run hash, or the failure."""
        try:
            src = pipeline.compile(self.op, trace, self.bench_dims, self.backend).source
        except MoveError as e:
            return None, Result("legality", message=str(e), diagnostics={"error": e.to_dict()})
        except KevolveError as e:
            return None, Result("render", message=pipeline.describe(e)[:1500])
        return run_hash(src.hash, self.cfg.backend, self.toolchain, self.hardware), None

    def _similar(self, arch) -> tuple:
        """Best traces of the most similar ops in the archive (the proposer's skill library)."""
        from .proposers.claude import similar_ops
        return tuple(similar_ops(arch, self.op, self.cfg.backend, self.hardware))

    def executor(self):
        env = dict(self.backend.worker_env())
        if self.cfg.executor == "ray":
            from .executors import RayExecutor
            return RayExecutor(address=self.cfg.address, gpu=self.gpu,
                               timeout_s=self.cfg.timeout_s, env=env)
        from .worker import WorkerPool
        return WorkerPool(self.cfg.workers, self.cfg.timeout_s, self.cfg.mem_limit_mb, env)

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> Summary:
        from ..archive import Archive
        from .hardware import measure_ceilings
        from .proposers import make as make_proposer

        cfg = self.cfg
        t0 = time.time()
        os.makedirs(os.path.dirname(os.path.abspath(cfg.db)), exist_ok=True)
        arch = Archive(cfg.db)
        summ = Summary(cfg.op, cfg.backend, self.hardware)
        pool = pop = proposer = None
        try:
            arch.quick_check()  # before the first write: a damaged file is refused, not extended
            op_id = arch.op_id(self.op)
            ceilings = arch.ceilings(self.hardware)
            if not ceilings or (not self.gpu and "copy_threads" not in ceilings):
                # (CPU ceilings from before copy_threads may be one thread's: measure again)
                ceilings = measure_ceilings(self.gpu, self.threads)
                for k, v in ceilings.items():
                    arch.set_ceiling(self.hardware, k, v)
            self.ceilings = ceilings
            limits = self.backend.limits()  # empty where no device is present
            pop = Population(self.rng)
            done = arch.evaluated(op_id, cfg.backend, self.hardware)
            default = self.default_json
            for s in arch.scored(op_id, cfg.backend, self.hardware):
                pop.add(s)
                if s.trace_json == default and s.result.ok:
                    summ.default_ms = s.result.time_ms
            prior = len(done)
            target = cfg.budget if cfg.resume else prior + cfg.budget
            if cfg.resume:
                summ.evaluated = prior
            popts = {"seed": cfg.seed, **cfg.proposer_options}
            if cfg.proposer == "claude":
                popts["archive"] = arch  # token usage goes to the archive
            proposer = make_proposer(cfg.proposer, **popts)
            seeds = [(default, "default", None)]
            if cfg.resume:  # what a killed run had in flight: recorded, never evaluated
                seeds = _in_flight(arch, op_id) + seeds
            for hw in arch.hardware_names():
                if hw != self.hardware:
                    b = arch.best(cfg.op, cfg.backend, hw)
                    if b is not None:
                        seeds.append((b.trace_json, f"seed:{hw}", None))
            pool = self.executor()
            stale = self.stale(pop, cfg.refresh)
            self.on_event("start", {"target": target, "prior": prior,
                                    "hardware": self.hardware, "stale": len(stale)})
            step = max(1, cfg.workers)
            for i in range(0, len(stale), step):
                if cfg.minutes is not None and time.time() - t0 > cfg.minutes * 60:
                    break
                self._remeasure(pool, arch, op_id, stale[i:i + step], done, summ, pop)
            generation = 0
            stall = 0
            while len(done) < target:
                if cfg.minutes is not None and time.time() - t0 > cfg.minutes * 60:
                    break
                n = max(1, min(cfg.workers, target - len(done)))
                if seeds:
                    props = [(tj, why, None) for tj, why, _ in seeds[:n]]
                    seeds = seeds[n:]
                    pname = "seed"
                else:
                    # Nothing correct yet (the default failed at some shape): mutate the
                    # default anyway rather than stall.
                    parents = pop.parents(3) or (Scored(default, Result("seed")),)
                    ctx = ProposalContext(
                        cfg.op, op_text(self.op), cfg.backend, asdict(self.backend.caps),
                        default, parents, pop.best, len(done),
                        self.rng.randrange(1 << 30), self.bench_dims, self.gpu, ceilings,
                        self._similar(arch) if cfg.proposer == "claude" else (), limits)
                    got = proposer.propose(ctx, n)
                    props = [(p.trace_json, p.note, p.parent_id) for p in got]
                    pname = proposer.name
                    if getattr(proposer, "fell_back", None):
                        pname = f"{proposer.name}->heuristic"
                if not props:
                    stall += 1
                    if stall >= STALL_ROUNDS:
                        summ.stalled = True
                        self.on_event("stalled", {})
                        break
                    continue
                generation += 1
                jobs = []
                for tj, why, parent in props:
                    r = self._admit(arch, op_id, tj, why, parent, pname, generation, done,
                                    summ, pop, not summ.baseline_ms)
                    if r is not None:
                        jobs.append(r)
                    if len(done) + len(jobs) >= target:
                        break
                stall = 0 if jobs or props else stall + 1
                hashes = {j.candidate_id: h for j, h in jobs}
                # The batch's results first, then verification (executors are not
                # reentrant); a kill loses at most this batch, which is in flight.
                batch = list(pool.map([j for j, _ in jobs]))
                for job, res in batch:
                    res = self._verify(pool, job, res, pop)
                    self._record(arch, op_id, job.candidate_id, job.trace_json, res,
                                 hashes[job.candidate_id], done, summ, pop)
            if pop.best is not None:
                self._pair(pool, pop.best, summ)
        finally:
            if pool is not None:
                pool.close()
            summ.best = pop.best if pop is not None else None
            summ.seconds = time.time() - t0
            summ.skipped = Counter({k: v for k, v in getattr(proposer, "skipped", {}).items()
                                    if k.startswith("resources.")})
            arch.close()
        return summ

    def _pair(self, pool, best: Scored, summ: Summary) -> None:
        """Time the best schedule and torch eager in one job, so that the speedup compares
        two times taken side by side: an archived eager time may come from another load,
        thread count or torch version, and is never compared with."""
        self.on_event("pairing", {"candidate": best.candidate_id})
        job = replace(self.job(best.trace_json, best.candidate_id, baseline=True, verify=True),
                      check_bench_shape=False)
        for _, res in pool.map([job]):
            if res.ok and res.time_ms and res.baseline_ms:
                summ.paired_ms, summ.baseline_ms = res.time_ms, res.baseline_ms

    def stale(self, pop: Population, k: int) -> list[tuple[Scored, str | None, Result | None]]:
        """Of the k fastest results in the population, those measured on other generated
        code than the trace renders to now (or that no longer render), fastest first, each
        with render_hash's (run hash now, failure)."""
        out = []
        for s in sorted(pop.all_ok, key=lambda s: s.result.time_ms)[:max(0, k)]:
            rh, fail = self.render_hash(Trace.from_json(s.trace_json))
            if rh is None or rh != s.result.source_hash:
                out.append((s, rh, fail))
        return out

    def _remeasure(self, pool, arch, op_id, stale: list, done, summ, pop) -> None:
        """Measure stale results (from `stale`) again, as new results of the same
        candidates. Until then they leave the population: a time from other code must not
        pick parents or the top-k. Code another candidate already ran here reuses that
        result."""
        jobs, was = [], {}
        for old, rh, fail in stale:
            cand = old.candidate_id
            was[cand] = old
            pop.drop(cand)
            if fail is not None:
                self._record(arch, op_id, cand, old.trace_json, fail, None, done, summ, pop,
                             was=old)
                continue
            prev = arch.find_run(op_id, self.cfg.backend, self.hardware, rh)
            if prev is not None:
                self._record(arch, op_id, cand, old.trace_json, reused(prev),
                             rh, done, summ, pop, was=old, add=False)
                continue
            jobs.append((self.job(old.trace_json, cand, baseline=False, verify=False), rh))
        hashes = {j.candidate_id: h for j, h in jobs}
        for job, res in list(pool.map([j for j, _ in jobs])):
            res = self._verify(pool, job, res, pop)
            self._record(arch, op_id, job.candidate_id, job.trace_json, res,
                         hashes[job.candidate_id], done, summ, pop, was=was[job.candidate_id])

    def _admit(self, arch, op_id, trace_json, note, parent, proposer, generation, done,
               summ, pop, want_baseline):
        """Record a candidate; return (job, run_hash) when it must be evaluated."""
        try:
            tj = Trace.from_json(trace_json).to_json()
        except MoveError as e:  # proposers validate; count it rather than crash
            summ.failures["legality"] += 1
            self.on_event("rejected", {"message": str(e)})
            return None
        cand, _ = arch.add_candidate(op_id, tj, parent, proposer, generation, note)
        if cand in done:
            return None
        rh, fail = self.render_hash(Trace.from_json(tj))
        if fail is not None:
            self._record(arch, op_id, cand, tj, fail, None, done, summ, pop)
            return None
        prev = arch.find_run(op_id, self.cfg.backend, self.hardware, rh)
        if prev is not None:
            summ.reused += 1
            arch.add_result(cand, self.hardware, self.cfg.backend, self.toolchain,
                            reused(prev), rh, self.bench_shape, [0, 1, 2])
            done.add(cand)
            self.on_event("reused", {"candidate": cand})
            return None
        job = self.job(tj, cand, baseline=want_baseline and proposer == "seed", verify=False)
        return job, rh

    def _verify(self, pool, job: EvalJob, res: Result, pop: Population) -> Result:
        """A candidate that would enter the top of the population is re-checked at the
        full benchmark shape before it counts. One whose time is below the roofline floor
        is also timed again: it counts (with the new time) only if that time is no longer
        below the floor; otherwise it is recorded as `suspicious`."""
        if not res.ok or res.time_ms is None:
            return res
        why = self.suspicion(res)
        if why is None and res.time_ms >= pop.kth_time(self.cfg.top_k):
            return res
        vjob = replace(job, check_shapes=(), check_bench_shape=True, time=why is not None,
                       baseline=False)
        vres = None
        for _, got in pool.map([vjob]):
            vres = got
        if vres is None:
            return res
        if not vres.ok:
            return replace(vres, message=f"benchmark-shape check: {vres.message}",
                           diagnostics={**res.diagnostics, **vres.diagnostics})
        d = dict(res.diagnostics)
        d["verified_bench_shape"] = True
        d["max_error_bench"] = vres.max_error
        if why is None:
            return replace(res, diagnostics=d)
        d["suspicious"] = {"time_ms": res.time_ms, "times_ms": list(res.times_ms),
                           "reason": why}
        again = self.suspicion(vres)
        seconds = res.seconds + vres.seconds
        if again is not None:
            self.on_event("suspicious", {"candidate": job.candidate_id, "reason": again})
            return Result("suspicious", time_ms=vres.time_ms, times_ms=vres.times_ms,
                          baseline_ms=res.baseline_ms, max_error=res.max_error,
                          message=f"too fast to be true, twice: first {why}; timed again, "
                          f"{again}", diagnostics=d, source_hash=res.source_hash,
                          seconds=seconds)
        d["retimed"] = True
        d["achieved_bytes_per_s"] = vres.diagnostics.get("achieved_bytes_per_s")
        return replace(res, time_ms=vres.time_ms, times_ms=vres.times_ms, diagnostics=d,
                       seconds=seconds)

    def _record(self, arch, op_id, cand, trace_json, res: Result, rh, done, summ, pop,
                was: Scored | None = None, add: bool = True):
        """Archive a result and count it. `was`: the stale result this one measures again
        (counted as re-measured, not evaluated). `add` False: kept out of the population
        (another candidate's result for identical code, which is there already)."""
        if was is not None:
            res = replace(res, diagnostics={**res.diagnostics, "remeasured_from": {
                "time_ms": was.result.time_ms, "run_hash": was.result.source_hash}})
        arch.add_result(cand, self.hardware, self.cfg.backend, self.toolchain, res, rh,
                        self.bench_shape, [0, 1, 2])
        done.add(cand)
        if was is None:
            summ.evaluated += 1
            if not res.ok:
                summ.failed += 1
                summ.failures[res.verdict] += 1
        else:
            summ.remeasured += 1
            if not res.ok:
                summ.remeasure_failed += 1
        if res.baseline_ms:
            summ.baseline_ms = res.baseline_ms
        s = Scored(trace_json, res, cand)
        if res.ok and trace_json == self.default_json and (summ.default_ms is None or was):
            summ.default_ms = res.time_ms
        if add:
            pop.add(s)
        b = pop.best
        if was is not None:
            self.on_event("remeasured", {"candidate": cand, "result": res, "best": b,
                                         "was_ms": was.result.time_ms,
                                         "remeasured": summ.remeasured})
            return
        summ.best_so_far.append((summ.evaluated, b.result.time_ms if b else None))
        self.on_event("result", {"candidate": cand, "result": res, "best": b,
                                 "evaluated": summ.evaluated, "failed": summ.failed,
                                 "failures": dict(summ.failures),
                                 "baseline_ms": summ.baseline_ms})


def evolve(cfg: SearchConfig, on_event=None) -> Summary:
    return Search(cfg, on_event).run()
