"""The evolve loop: propose -> dedupe -> evaluate (in workers) -> record -> repeat.

The loop only orchestrates, as OpenEvolve's controller does: the population (population.py)
picks parents, a proposer (proposers/) writes traces, an executor (kevolve.evaluate) runs
them, verify.py decides whether a time is believed, and every result goes to the measure
callbacks (callbacks.py; the archive writer first) as it happens, so a killed search resumes
with nothing lost but what was in flight. Candidates whose generated code is identical to
one already measured on this hardware (moves that commute or change nothing) reuse that
result instead of running.

Archived times describe the code that ran then: a newer kevolve, backend template or
toolchain may generate other code for the same trace. A result whose run hash differs from
the one the trace would get now is stale; the fastest stale results are measured again
before the search proposes anything, so parents and the archive's best are current."""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from dataclasses import asdict, fields, replace

from .. import pipeline
from ..archive import RunKey, reused
from ..archive.records import Scored
from ..errors import KevolveError
from ..evaluate import hardware
from ..evaluate.job import EvalJob, Result
from ..ir.printer import op_text
from ..schedule import MoveError, Trace, default_trace
from .callbacks import AddToArchive, MeasureCallback, Measured
from .config import STALL_ROUNDS, SearchConfig, Summary
from .population import Population
from .proposers.base import ProposalContext
from .verify import reason, verify


def _in_flight(arch, op_id: int) -> list[tuple[str, str, int | None]]:
    """(trace, note, parent) of this op's candidates with no result anywhere: those a killed
    search was evaluating. (Another search running on the archive right now may be
    evaluating them too; then both record a result.)"""
    return [(trace, note or "in flight when a search stopped", parent)
            for trace, note, parent in arch.in_flight(op_id)]


class Search:
    """One search of one op on one backend. `on_event(kind, data)` hears of progress;
    `callbacks` (callbacks.MeasureCallback) receive every result after the archive
    writer."""

    def __init__(self, cfg: SearchConfig, on_event=None,
                 callbacks: tuple[MeasureCallback, ...] = ()):
        from ..backends.registry import get as get_backend
        from ..ops import resolve

        self.cfg, self.on_event = cfg, on_event or (lambda *a: None)
        self.callbacks = tuple(callbacks)
        self._measured: list[MeasureCallback] = []  # the run's: archive writer + callbacks
        self.opdef = resolve(cfg.op)  # jobs carry opdef.ref: workers resolve it again
        self.name = self.opdef.name
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
        self.hardware = hardware.hardware_name(self.gpu, self.threads)
        self.toolchain = hardware.toolchain(self.backend)
        self.rng = random.Random(cfg.seed)
        self.default_json = default_trace(self.op, self.bench_dims).to_json()
        self.ceilings: dict = {}
        self.spent = self.prior = 0  # candidates that used budget (in all; before this run)
        self.failures: list[Scored] = []  # this run's failed candidates, latest last
        # The roofline check needs measured times (not an emulator's estimate).
        self.roofline_slack = cfg.roofline_slack if self.backend.target.measured else 0.0
        self.roofline_min_bytes = cfg.roofline_min_bytes if cfg.roofline_min_bytes is not None \
            else 0 if self.gpu else max(64 << 20, 4 * hardware.last_level_cache_bytes())

    def floor_ceilings(self) -> dict:
        """The ceilings a time is held against: on a CPU measured with the kernels' threads
        (hardware.measure_ceilings), so used as they are."""
        return dict(self.ceilings)

    def suspicion(self, res: Result) -> str | None:
        """Why a result is too good to be true, or None."""
        return reason(res, self.floor_ceilings(), self.roofline_slack, self.roofline_min_bytes)

    # -- pieces ------------------------------------------------------------------------
    def job(self, trace_json: str, cand: int | None, baseline: bool, verify: bool,
            time_it: bool = True) -> EvalJob:
        opts = dict(self.cfg.backend_options)
        if self.backend.target.host_threads and self.threads:
            opts.setdefault("threads", self.threads)
        return EvalJob(self.opdef.ref, self.cfg.backend, trace_json, self.bench_shape,
                       () if verify else self.check_shapes, (0, 1, 2), opts,
                       check_bench_shape=True, time=time_it, repeat=self.cfg.repeat,
                       threads=self.threads, baseline=baseline, candidate_id=cand)

    def render_hash(self, trace: Trace) -> tuple[str | None, Result | None]:
        """Lower and render in this process (cheap): the run hash, or the failure."""
        try:
            src = pipeline.compile(self.op, trace, self.bench_dims, self.backend).source
        except MoveError as e:
            return None, Result("legality", message=str(e), diagnostics={"error": e.to_dict()})
        except KevolveError as e:
            return None, Result("render", message=pipeline.describe(e)[:1500])
        return RunKey(src.hash, self.cfg.backend, self.toolchain, self.hardware).stable_hash(), None

    def _similar(self, arch) -> tuple:
        """Best traces of the most similar ops in the archive (the proposer's skill library)."""
        from .proposers.llm.similar import similar_ops
        return tuple(similar_ops(arch, self.op, self.cfg.backend, self.hardware))

    def executor(self):
        env = dict(self.backend.worker_env())
        if self.cfg.executor == "ray":
            from ..evaluate.executors import RayExecutor
            return RayExecutor(address=self.cfg.address, gpu=self.gpu,
                               timeout_s=self.cfg.timeout_s, env=env)
        from ..evaluate.worker import WorkerPool
        return WorkerPool(self.cfg.workers, self.cfg.timeout_s, self.cfg.mem_limit_mb, env)

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> Summary:
        from ..archive import Archive
        from .proposers import make as make_proposer

        cfg = self.cfg
        t0 = time.time()
        os.makedirs(os.path.dirname(os.path.abspath(cfg.db)), exist_ok=True)
        arch = Archive(cfg.db)
        summ = Summary(self.name, cfg.backend, self.hardware,
                       reference=self.opdef.has_reference)
        pool = pop = proposer = None
        run_id, status = None, "failed"
        try:
            arch.quick_check()  # before the first write: a damaged file is refused, not extended
            op_id = arch.op_id(self.op)
            run_id = arch.start_run(op_id, cfg.backend, self.hardware, {
                **{f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name != "db"},
                "bench_shape": self.bench_shape})  # (objects in options are stored as text)
            ceilings = arch.ceilings(self.hardware)
            if not ceilings or (not self.gpu and "copy_threads" not in ceilings):
                # (CPU ceilings from before copy_threads may be one thread's: measure again)
                ceilings = hardware.measure_ceilings(self.gpu, self.threads)
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
            self.spent = self.prior = prior  # budget used (identical code uses none)
            target = cfg.budget if cfg.resume else prior + cfg.budget
            if cfg.resume:
                summ.evaluated = prior
            self._measured = [AddToArchive(arch, self.hardware, cfg.backend, self.toolchain,
                                           self.bench_shape), *self.callbacks]
            proposer = make_proposer(cfg.proposer, archive=arch,
                                     **{"seed": cfg.seed, **cfg.proposer_options})
            seeds = [(default, "default", None)]
            if cfg.resume:  # what a killed run had in flight: recorded, never evaluated
                seeds = _in_flight(arch, op_id) + seeds
            for hw in arch.hardware_names():
                if hw != self.hardware:
                    b = arch.best(self.name, cfg.backend, hw)
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
            while self.spent < target:
                if cfg.minutes is not None and time.time() - t0 > cfg.minutes * 60:
                    break
                n = max(1, min(cfg.workers, target - self.spent))
                seeding = bool(seeds)
                if seeding:
                    props = [(tj, why, None, "seed", None) for tj, why, _ in seeds[:n]]
                    seeds = seeds[n:]
                else:
                    # Nothing correct yet (the default failed at some shape): mutate the
                    # default anyway rather than stall.
                    parents = pop.parents(3) or (Scored(default, Result("seed")),)
                    ctx = ProposalContext(
                        self.opdef.ref, op_text(self.op), cfg.backend,
                        asdict(self.backend.caps),
                        default, parents, pop.best, len(done),
                        self.rng.randrange(1 << 30), self.bench_dims, self.gpu, ceilings,
                        self._similar(arch) if proposer.needs_archive else (), limits,
                        tuple(self.failures[-3:]),
                        tuple(sorted(pop.all_ok, key=lambda s: s.result.time_ms)[:3]),
                        self.hardware)
                    got = proposer.propose(ctx, n)
                    props = [(p.trace_json, p.note, p.parent_id, p.proposer or proposer.name,
                              p.prompt_id) for p in got]
                if not props:
                    stall += 1
                    if stall >= STALL_ROUNDS:
                        summ.stalled = True
                        self.on_event("stalled", {})
                        break
                    continue
                generation += 1
                jobs, twins, spent_before = [], {}, self.spent
                for tj, why, parent, pname, prompt_id in props:
                    r = self._admit(arch, op_id, tj, why, parent, pname, generation, done,
                                    summ, pop, not summ.baseline_ms, prompt_id, jobs, twins)
                    if r is not None:
                        jobs.append(r)
                    if self.spent + len(jobs) >= target:
                        break
                # A round that only met code already measured counts toward a stall: a
                # proposer that repeats itself must not loop for ever on free candidates.
                # (seeds already measured, on resume, are no stall)
                stall = 0 if jobs or self.spent > spent_before or seeding else stall + 1
                if stall >= STALL_ROUNDS:
                    summ.stalled = True
                    self.on_event("stalled", {})
                    break
                hashes = {j.candidate_id: h for j, h in jobs}
                # The batch's results first, then verification (executors are not
                # reentrant); a kill loses at most this batch, which is in flight.
                batch = list(pool.map([j for j, _ in jobs]))
                for job, res in batch:
                    res = self._verify(pool, job, res, pop)
                    incumbent = pop.best
                    self._record(job.candidate_id, job.trace_json, res,
                                 hashes[job.candidate_id], done, summ, pop, quiet=True)
                    if cfg.duel > 0 and res.ok and incumbent is not None:
                        self._duel(pool, pop, Scored(job.trace_json, res, job.candidate_id),
                                   incumbent, summ)
                    self._progress(job.candidate_id, res, summ, pop)
                    for cand, tj in twins.get(hashes[job.candidate_id], ()):
                        self._reuse(cand, tj, res, hashes[job.candidate_id], done, summ)
            if pop.best is not None and cfg.confirm > 1 and self.spent > self.prior:
                self._confirm(pool, pop, summ)
            if pop.best is not None:
                self._pair(pool, pop.best, summ, arch)
            status = "stalled" if summ.stalled else "done"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            if pool is not None:
                pool.close()
            if run_id is not None:
                try:
                    arch.finish_run(run_id, status)
                except (KevolveError, OSError):  # the archive's own failure propagates
                    pass
            summ.best = pop.best if pop is not None else None
            summ.seconds = time.time() - t0
            summ.skipped = Counter({} if proposer is None else
                                   {k: v for k, v in proposer.skipped.items()
                                    if k.startswith("resources.")})
            summ.refused = Counter({} if proposer is None else dict(proposer.skipped))
            arch.close()
        return summ

    def _confirm(self, pool, pop: Population, summ: Summary) -> None:
        """Time the cfg.confirm fastest candidates of distinct code again, cfg.confirm_rounds
        rounds (`_retime`), so the best is crowned on re-timed figures. A shared machine's
        timings of one kernel vary by a fifth and more: one lucky timing must not win."""
        picked, seen, run_hash = [], set(), {}
        for s in sorted(pop.all_ok, key=lambda s: s.result.time_ms):
            rh, _ = self.render_hash(Trace.from_json(s.trace_json))
            if rh is not None and rh not in seen:
                seen.add(rh)
                picked.append(s)
                run_hash[s.candidate_id] = rh
            if len(picked) == self.cfg.confirm:
                break
        if len(picked) < 2:
            return
        for entry in self._retime(pool, pop, picked, self.cfg.confirm_rounds, "confirmed",
                                  run_hash):
            summ.confirmed.append(entry)
        # Other candidates of the same code keep their single timings: they leave the
        # population, which the re-timed result stands for.
        done_ids = {c["candidate"] for c in summ.confirmed}
        for s in list(pop.all_ok):
            if s.candidate_id not in done_ids and \
                    self.render_hash(Trace.from_json(s.trace_json))[0] in seen:
                pop.drop(s.candidate_id)
        self.on_event("confirmed", {"confirmed": summ.confirmed})

    def time_rounds(self, pool, traces: list[tuple[str, int | None]],
                    rounds: int) -> list[tuple[list[float], Result | None]]:
        """Each (trace JSON, candidate id) timed once a round at the bench shape, `rounds`
        rounds in the orders of timing.orders, one job at a time (never two timings at
        once): per trace, its times and its last passing result (none where it failed)."""
        from ..evaluate.timing import orders

        times: list[list[float]] = [[] for _ in traces]
        last: list[Result | None] = [None] * len(traces)
        for order in orders(len(traces), rounds):
            for i in order:
                tj, cand = traces[i]
                job = replace(self.job(tj, cand, baseline=False, verify=True),
                              check_bench_shape=False)
                for _, res in pool.map([job]):
                    if res.ok and res.time_ms:
                        times[i].append(res.time_ms)
                        last[i] = res
        return list(zip(times, last, strict=True))

    def _retime(self, pool, pop: Population, picked: list[Scored], rounds: int, label: str,
                run_hash: dict | None = None) -> list[dict]:
        """Time `picked` again (`time_rounds`); each one's new result (the median over
        rounds, times_ms the round medians, diagnostics[label] with the first time and the
        spread) replaces its earlier timing in the population and the archive. Returns one
        entry per candidate re-timed: candidate, first_ms, median_ms, spread, rounds."""
        from statistics import median

        timed = self.time_rounds(pool, [(s.trace_json, s.candidate_id) for s in picked],
                                 rounds)
        out = []
        for s, (ts, last) in zip(picked, timed, strict=True):
            if not ts:
                continue
            med = median(ts)
            spread = (max(ts) - min(ts)) / med
            rh = (run_hash or {}).get(s.candidate_id) or \
                self.render_hash(Trace.from_json(s.trace_json))[0]
            res = replace(last, time_ms=med, times_ms=tuple(ts),
                          source_hash=rh, diagnostics={
                **last.diagnostics, label: {
                    "rounds": len(ts), "spread": round(spread, 4),
                    "first_ms": s.result.time_ms}})
            self._measure(Measured(s.candidate_id, s.trace_json, res, rh, s))
            pop.drop(s.candidate_id)
            pop.add(Scored(s.trace_json, res, s.candidate_id, s.parent_id, s.proposer))
            out.append({"candidate": s.candidate_id, "first_ms": s.result.time_ms,
                        "median_ms": med, "spread": round(spread, 4), "rounds": len(ts)})
        return out

    def _duel(self, pool, pop: Population, cand: Scored, best: Scored,
              summ: Summary) -> None:
        """A result faster than the best on its single timing is timed again beside the
        best (cfg.duel rounds, interleaved, `_retime`), and both keep their duel medians:
        it leads only if it is faster there. One lucky timing would otherwise crown a
        kernel no faster than the last, and the search would go on from it."""
        if best.candidate_id == cand.candidate_id or \
                cand.result.time_ms >= best.result.time_ms:
            return
        out = self._retime(pool, pop, [cand, best], self.cfg.duel, "duel")
        if len(out) == 2:
            won = out[0]["median_ms"] < out[1]["median_ms"]
            summ.duels.append({"candidate": cand.candidate_id, "incumbent": best.candidate_id,
                               "won": won, "candidate_ms": out[0]["median_ms"],
                               "incumbent_ms": out[1]["median_ms"],
                               "spreads": [out[0]["spread"], out[1]["spread"]]})
            self.on_event("duel", summ.duels[-1])

    def _pair(self, pool, best: Scored, summ: Summary, arch=None) -> None:
        """Time the best schedule and torch eager in one job, so that the speedup compares
        two times taken side by side: an archived eager time may come from another load,
        thread count or torch version, and is never compared with."""
        self.on_event("pairing", {"candidate": best.candidate_id})
        job = replace(self.job(best.trace_json, best.candidate_id, baseline=True, verify=True),
                      check_bench_shape=False)
        for _, res in pool.map([job]):
            if res.ok and res.time_ms and res.baseline_ms:
                summ.paired_ms, summ.baseline_ms = res.time_ms, res.baseline_ms
                summ.compile_ms = res.diagnostics.get("baseline.compile_ms")
                summ.compile_error = res.diagnostics.get("baseline.compile_error")
                if arch is not None:  # kept per (op, shape, hardware, torch)
                    arch.set_baselines(self.name, self.bench_shape, self.hardware,
                                       self.torch_version(), {
                                           "eager": res.baseline_ms,
                                           "compile": summ.compile_ms})

    @staticmethod
    def torch_version() -> str:
        import torch
        return f"torch {torch.__version__}"

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
                self._record(cand, old.trace_json, fail, None, done, summ, pop, was=old)
                continue
            prev = arch.find_run(op_id, self.cfg.backend, self.hardware, rh)
            if prev is not None:
                self._record(cand, old.trace_json, reused(prev), rh, done, summ, pop,
                             was=old, add=False)
                continue
            jobs.append((self.job(old.trace_json, cand, baseline=False, verify=False), rh))
        hashes = {j.candidate_id: h for j, h in jobs}
        for job, res in list(pool.map([j for j, _ in jobs])):
            res = self._verify(pool, job, res, pop)
            self._record(job.candidate_id, job.trace_json, res,
                         hashes[job.candidate_id], done, summ, pop, was=was[job.candidate_id])

    def _admit(self, arch, op_id, trace_json, note, parent, proposer, generation, done,
               summ, pop, want_baseline, prompt_id=None, batch=(), twins=None):
        """Record a candidate; return (job, run_hash) when it must be evaluated. Code
        identical to a measured candidate's reuses that result; code identical to a
        candidate of this `batch` waits for its result (`twins`); neither uses budget."""
        try:
            tj = Trace.from_json(trace_json).to_json()
        except MoveError as e:  # proposers validate; count it rather than crash
            summ.failures["legality"] += 1
            self.on_event("rejected", {"message": str(e)})
            return None
        cand, _ = arch.add_candidate(op_id, tj, parent, proposer, generation, note)
        if prompt_id is not None:
            arch.link_prompt(prompt_id, cand)
        if cand in done or any(j.candidate_id == cand for j, _ in batch):
            return None
        rh, fail = self.render_hash(Trace.from_json(tj))
        if fail is not None:
            self._record(cand, tj, fail, None, done, summ, pop)
            return None
        prev = arch.find_run(op_id, self.cfg.backend, self.hardware, rh)
        if prev is not None:
            self._reuse(cand, tj, prev, rh, done, summ)
            return None
        if self.cfg.dedup and twins is not None and any(h == rh for _, h in batch):
            twins.setdefault(rh, []).append((cand, tj))
            return None
        job = self.job(tj, cand, baseline=want_baseline and proposer == "seed", verify=False)
        return job, rh

    def _reuse(self, cand, tj, prev: Result, rh, done, summ) -> None:
        """A candidate whose code was measured already: that result, recorded as reused.
        It uses no budget (with SearchConfig.dedup; without, it does, as it once did)."""
        summ.reused += 1
        if not self.cfg.dedup:
            self.spent += 1
        self._measure(Measured(cand, tj, reused(prev), rh))
        done.add(cand)
        self.on_event("reused", {"candidate": cand})

    def _verify(self, pool, job: EvalJob, res: Result, pop: Population) -> Result:
        """verify.verify against this search's top-k and roofline floor."""
        return verify(pool, job, res, pop.kth_time(self.cfg.top_k), self.suspicion,
                      self.on_event)

    def _measure(self, m: Measured) -> None:
        """Hand a result to the measure callbacks, the archive writer first."""
        for cb in self._measured:
            cb(m)

    def _record(self, cand, trace_json, res: Result, rh, done, summ, pop,
                was: Scored | None = None, add: bool = True, quiet: bool = False):
        """Record a result (through the measure callbacks) and count it. `was`: the stale
        result this one measures again (counted as re-measured, not evaluated). `add`
        False: kept out of the population (another candidate's result for identical code,
        which is there already). `quiet`: the caller reports the progress (`_progress`),
        after a duel may have changed who leads."""
        if was is not None:
            res = replace(res, diagnostics={**res.diagnostics, "remeasured_from": {
                "time_ms": was.result.time_ms, "run_hash": was.result.source_hash}})
        self._measure(Measured(cand, trace_json, res, rh, was))
        done.add(cand)
        if was is None:
            summ.evaluated += 1
            self.spent += 1
            if not res.ok:
                self.failures.append(Scored(trace_json, res, cand))
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
        if not quiet:
            self._progress(cand, res, summ, pop)

    def _progress(self, cand, res: Result, summ: Summary, pop: Population) -> None:
        """One point of the best-so-far curve, and the "result" event."""
        b = pop.best
        # (budget spent in this run, best): with dedup off, reused candidates spent it too
        summ.best_so_far.append((self.spent - self.prior, b.result.time_ms if b else None))
        self.on_event("result", {"candidate": cand, "result": res, "best": b,
                                 "evaluated": summ.evaluated, "failed": summ.failed,
                                 "failures": dict(summ.failures),
                                 "baseline_ms": summ.baseline_ms})


def evolve(cfg: SearchConfig, on_event=None,
           callbacks: tuple[MeasureCallback, ...] = ()) -> Summary:
    return Search(cfg, on_event, callbacks).run()
