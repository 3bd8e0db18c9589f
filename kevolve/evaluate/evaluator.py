"""Checking and timing one kernel: the stages a candidate passes through (job.STAGES).

Correctness is judged against the float64 reference (oracle.py) with a tolerance by
output dtype (check.py); outputs are poisoned with NaN first (NaN never passes).

Evaluation is hermetic. Inputs are drawn once per worker and kept pristine: every kernel
call gets a fresh copy, never the kept arrays, and the copy must come back unchanged (a
kernel that writes its inputs fails, and no later candidate sees what it wrote). Where the
benchmark shape was checked (every search candidate), the outputs the kernel leaves after
timing are checked again, and then once more after new inputs are copied into the very
buffers it was timed on: one that accumulates into outputs it expects zeroed, races, or
replays an earlier result for buffers it has seen fails. On CPUs the outputs are poisoned
before every timed call and a kernel call may not start threads (work finished after the
call returns does not count; a thread left behind would fault into the next candidate; the
worker that ran such a kernel is retired). On GPUs the device is synchronized and checked
for a pending error before a result leaves the worker, so a late asynchronous error is
blamed on the candidate that caused it. Timing is a median after warm-up (timing.py:
device events on GPUs, `perf_counter` on CPUs). An unexpected exception anywhere is a
`crash` result, never the end of a worker."""

from __future__ import annotations

import time
import traceback
from dataclasses import replace

import numpy as np

from ..backends.compiler_reports import totals
from ..errors import CandidateError, InternalError, KevolveError, LaunchError, WrongResult
from ..ir.errors import InterpError
from ..ir.interp import bind_dims
from .check import (
    alloc_outputs,
    compare,
    copy_arrays,
    copy_into,
    inputs_for,
    poison,
    to_host,
    unchanged,
)
from .hermetic import ThreadMark, device_health
from .job import EvalJob, Result
from .oracle import reference
from .timing import MIN_TIMED_MS, chunk_medians, median, time_cpu, time_gpu

# -- one candidate, stage by stage ------------------------------------------------------


def _compiler_diag(k, diag: dict) -> None:
    """The build's compiler report as `compiler.*` diagnostics (with the search's totals)."""
    diag.update({f"compiler.{key}": v for key, v in k.diagnostics.items()
                 if isinstance(v, (int, float, str))})
    diag.update({f"compiler.{key}": v for key, v in totals(k.diagnostics).items()})


def _repeated(op, outs, ref, shape, when: str) -> None:
    """The outputs a kernel left after being called again on the same buffers must still be
    right: one that accumulates into outputs it expects zeroed, or races, is right once."""
    chk = compare(op, {n: to_host(v) for n, v in outs.items()}, ref)
    if not chk.ok:
        raise WrongResult(f"shape {shape}: right on its first call but not {when} "
                          f"on the same buffers ({chk.message}); does the kernel rely on "
                          "outputs that start zeroed, or race?",
                          diagnostics={"max_error": chk.max_error})


def _trim(text: str, limit: int = 1500) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit // 3] + "\n...\n" + text[-2 * limit // 3:]


class Evaluator:
    """Evaluates jobs inside one (worker) process, keeping what is expensive to redo: built
    kernels (by source hash) and reference outputs (by op, shape and seed)."""

    def __init__(self, timing_lock=None, on_stage=None):
        self.timing_lock = timing_lock
        self.on_stage = on_stage  # called with each stage's name as it starts (the worker
        self.stage: str | None = None  # tells its parent, so a kill says where)
        self._refs: dict = {}
        self._kernels: dict = {}
        self._cases: dict = {}  # (op, shape, seed, lib, device) -> (case, pristine inputs)
        self._bench: dict = {}  # the current job's benchmark shape

    def _enter(self, stage: str) -> None:
        self.stage = stage
        if self.on_stage is not None:
            self.on_stage(stage)

    def evaluate(self, job: EvalJob) -> Result:
        t0 = time.perf_counter()
        diag: dict = {}
        self.stage = None
        try:
            res = self._run(job, diag)
        except CandidateError as f:
            diag.update(f.diagnostics)
            res = Result(f.stage, message=_trim(f.message), diagnostics=diag)
        except Exception as e:  # a bug or a broken backend: recorded, the worker lives on
            self._cases.clear()  # whatever raised may have left them half-written
            tb = "".join(traceback.format_exception(e)[-3:])
            diag["stage"] = self.stage
            res = Result("crash", message=_trim(f"evaluation raised {type(e).__name__}: {e} "
                                                f"(stage: {self.stage})\n{tb}"),
                         diagnostics=diag)
        return replace(res, seconds=time.perf_counter() - t0)

    # -- stages ------------------------------------------------------------------------
    def _kernel(self, op, trace, be, dims, diag):
        """Compile and build through the pipeline; a stage's failure is that stage's verdict
        (a bug in kevolve's own legality checks stays a crash)."""
        from .. import pipeline
        from ..schedule import MoveError

        try:
            src = pipeline.compile(op, trace, dims, be, self._enter).source
            k = pipeline.build(src, be, self._kernels, self._enter)
        except MoveError as e:
            raise CandidateError(str(e), "legality", {"error": e.to_dict()}) from None
        except KevolveError as e:
            if isinstance(e, InternalError) and e.stage == "legality":
                raise (e.__cause__ or e) from None
            stage = e.stage if e.stage in pipeline.STAGES else self.stage
            raise CandidateError(pipeline.describe(e), stage) from None
        _compiler_diag(k, diag)
        return src, k

    def _call(self, k, ins, outs, params, sync, host=True):
        mark = ThreadMark() if host else None
        try:
            k(ins, outs, params)
            sync()
        except Exception as e:
            raise launch_failure(e, "correctness") from None
        stray = mark.since() if mark is not None else None
        if stray:
            raise CandidateError(stray, "correctness", {"retired": True})

    @staticmethod
    def _modified(pristine, ins) -> str | None:
        """The input a kernel changed (compared with the pristine draw), or None; '?' when
        the comparison itself failed (a device in error)."""
        try:
            return unchanged(pristine, ins)
        except Exception:
            return "?"

    def _reference(self, opdef, op, case, key, gpu, ins):
        if key in self._refs:
            return self._refs[key]
        ref = reference(opdef, op, case, ins if gpu else None)
        small = [k for k in self._refs if k[1] != repr(sorted(self._bench.items()))]
        if len(small) > 16:  # the benchmark shape's references stay (they cost the most)
            for k in small:
                self._refs.pop(k)
        if len(self._refs) > 24:
            self._refs.clear()
        self._refs[key] = ref
        return ref

    def _case(self, opdef, op, shape, seed, lib, device):
        """(case, pristine inputs) for (shape, seed): drawn once per worker and reused by
        later candidates (gpu-sized tables take seconds to draw). The pristine arrays are
        never handed to a kernel: each call gets a copy (`copy_arrays`)."""
        key = (op.name, repr(sorted(shape.items())), seed, lib, device)
        if key not in self._cases:
            # the benchmark shape's draws (two seeds) are kept apart from the small shapes',
            # which would otherwise push them out before every candidate
            bench = repr(sorted(self._bench.items()))
            same = [k for k in self._cases if (k[1] == bench) == (key[1] == bench)]
            if len(same) >= (2 if key[1] == bench else 3):
                self._cases.pop(same[0])
            case = opdef.case(shape, seed)
            self._cases[key] = (case, inputs_for(op, case.inputs, lib, device))
        return key, self._cases[key]

    def _check(self, opdef, op, trace, be, shape, seed, diag, lib, device, gpu, sync,
               keep=False):
        ckey, (case, pristine) = self._case(opdef, op, shape, seed, lib, device)
        dims = bind_dims(op, case.inputs, case.params)
        src, k = self._kernel(op, trace, be, dims, diag)
        ins = copy_arrays(pristine, lib)  # this candidate's own: the kept ones stay pristine
        outs = alloc_outputs(op, dims, lib, device)
        self._enter("correctness")
        failed = None
        try:
            self._call(k, ins, outs, case.params, sync, host=not gpu)
        except CandidateError as e:
            failed = e
        changed = self._modified(pristine, ins)  # whatever else went wrong: say this first
        if changed and changed != "?":
            why = f" (its call also failed: {failed.message})" if failed else ""
            raise WrongResult(f"shape {shape}, seed {seed}: the kernel modified "
                              f"input {changed!r}{why}")
        if failed is not None:
            raise failed
        _compiler_diag(k, diag)  # a JIT (Triton) reports at its first launch
        key = (op.name, repr(sorted(shape.items())), seed)
        ref = self._reference(opdef, op, case, key, gpu, pristine)
        chk = compare(op, {n: to_host(v) for n, v in outs.items()}, ref)
        if not chk.ok:
            raise WrongResult(f"shape {shape}, seed {seed}: {chk.message}",
                              diagnostics={"max_error": chk.max_error})
        diag["max_error"] = max(diag.get("max_error", 0.0), chk.max_error)
        return (src, k, case, ins, outs, dims, ref, pristine) if keep else None

    def _run(self, job: EvalJob, diag: dict) -> Result:
        from ..backends.registry import get as get_backend
        from ..backends.target import BuildReport
        from ..ops import resolve
        from ..schedule import MoveError, Trace

        self._enter("legality")
        self._bench = dict(job.bench_shape)
        opdef = resolve(job.op)
        op = opdef.op_for(job.bench_shape)
        try:
            trace = Trace.from_json(job.trace_json)
        except MoveError as e:
            raise CandidateError(str(e), "legality", {"error": e.to_dict()}) from None
        be = get_backend(job.backend, **job.backend_options)
        target = be.target
        gpu, lib, device = target.on_device, target.tensor_lib, target.tensor_device
        if gpu:
            import torch
            sync = torch.cuda.synchronize
        else:
            def sync():
                return None
        if job.threads:
            _set_threads(job.threads)
        for shape in job.check_shapes:
            for seed in job.seeds:
                try:
                    self._check(opdef, op, trace, be, shape, seed, diag, lib, device, gpu,
                                sync)
                except InterpError as e:  # the op refuses this shape, whatever the kernel
                    raise InterpError(f"at the checked shape {shape}: "
                                      f"{e}") from e
        bench_seed = job.seeds[0] if job.seeds else 0
        src, k, case, ins, outs, dims, ref, pristine = self._check(
            opdef, op, trace, be, job.bench_shape, bench_seed, diag, lib, device, gpu, sync,
            keep=True) if job.check_bench_shape else self._bench_setup(
            opdef, op, trace, be, job.bench_shape, bench_seed, diag, lib, device)
        if not job.time:
            if ref is not None:  # timing would call it again on these buffers: so do we
                self._call(k, ins, outs, case.params, sync, host=not gpu)
                _repeated(op, outs, ref, job.bench_shape, "when called again")
                self._new_inputs(opdef, op, k, ins, outs, case, job, bench_seed, lib,
                                 device, gpu, sync)
            self._healthy(gpu)
            return Result("ok", max_error=diag.get("max_error"), diagnostics=diag,
                          source_hash=src.hash)
        from ..ir.roofline import floor

        fl = floor(op, case.inputs, case.params)
        diag.update(floor_bytes=fl.bytes, floor_flops=fl.flops)
        self._enter("timing")
        # torch.compile's seconds of compiling happen before the lock, not while held
        torch_ref = self._baseline(opdef, op, ins, case) if job.baseline else None
        lock = self.timing_lock
        if lock is not None:
            lock.acquire()
        try:
            mark = None if gpu else ThreadMark()
            try:
                if gpu:
                    times = [time_gpu(lambda: k(ins, outs, case.params))]
                else:
                    times = time_cpu(lambda: k(ins, outs, case.params), repeat=job.repeat,
                                     prepare=lambda: poison(outs), min_ms=MIN_TIMED_MS)
            except Exception as e:
                raise launch_failure(e, "timing") from None
            stray = mark.since() if mark is not None else None
            if stray:
                raise CandidateError(stray, "timing", {"retired": True})
            base = None
            if job.baseline:
                from .baseline import time_reference

                torch_ms = time_reference(torch_ref, gpu, job.repeat)
                base = torch_ms.get("eager_ms")
                diag.update({f"baseline.{k}": v for k, v in torch_ms.items()})
        finally:
            if lock is not None:
                lock.release()
        changed = self._modified(pristine, ins)
        if changed:
            raise WrongResult(f"shape {job.bench_shape}: the kernel modified input "
                              f"{changed!r} while it was being timed (its checks left it "
                              "intact)")
        if ref is not None:  # checked at this shape: are the timed calls' outputs right too?
            _repeated(op, outs, ref, job.bench_shape, "after timing")
            self._new_inputs(opdef, op, k, ins, outs, case, job, bench_seed, lib, device,
                             gpu, sync)
        self._healthy(gpu)
        t = median(times)
        _compiler_diag(k, diag)  # the bench shape's launch, when it was not checked first
        if not target.measured:  # an emulator's wall time says nothing of the target's
            est = BuildReport.of(k.diagnostics).estimate_ms
            if est is None:
                raise CandidateError(f"{job.backend} reports no time estimate for this "
                                     "kernel, and its wall time is an emulator's", "timing")
            diag.update(timing="estimate", estimate_ms=est, wall_ms=t)
            t, times = est, [est]
        diag["achieved_bytes_per_s"] = fl.bytes / (t * 1e-3) if t > 0 else None
        if len(times) > job.repeat:  # a short kernel's many calls: medians of job.repeat groups
            diag["timed_calls"] = len(times)
            times = chunk_medians(times, job.repeat)
        return Result("ok", time_ms=t, times_ms=tuple(times), baseline_ms=base,
                      max_error=diag.get("max_error"), diagnostics=diag, source_hash=src.hash)

    def _new_inputs(self, opdef, op, k, ins, outs, case, job, seed, lib, device, gpu,
                    sync) -> None:
        """Copy another draw's inputs into the buffers the kernel was timed on, call it once
        more and check it: a kernel that replays what it computed before for buffers it has
        seen (skipping work on repeated calls) fails. Skipped where the other draw's shapes
        differ (jagged ops draw their lengths)."""
        _, (case2, pristine2) = self._case(opdef, op, job.bench_shape, seed + 1, lib, device)
        if case2.params != case.params or any(
                tuple(pristine2[n].shape) != tuple(v.shape) for n, v in ins.items()):
            return
        copy_into(ins, pristine2)
        poison(outs)
        self._call(k, ins, outs, case2.params, sync, host=not gpu)
        key = (op.name, repr(sorted(job.bench_shape.items())), seed + 1)
        ref2 = self._reference(opdef, op, case2, key, gpu, pristine2)
        chk = compare(op, {n: to_host(v) for n, v in outs.items()}, ref2)
        if not chk.ok:
            raise WrongResult(f"shape {job.bench_shape}: right on the inputs it was timed on, "
                              f"but not after new inputs were copied into the same buffers "
                              f"({chk.message}); does the kernel replay an earlier result "
                              "for buffers it has seen?",
                              diagnostics={"max_error": chk.max_error})

    @staticmethod
    def _healthy(gpu: bool) -> None:
        """A device error still pending after the kernel's last call is this candidate's
        (its verdict a crash: the worker is replaced), not the next one's."""
        bad = device_health(gpu)
        if bad:
            raise CandidateError(f"a CUDA error surfaced after the kernel's last call "
                                 f"returned: {_trim(bad, 600)}", "crash", {"retired": True})

    def _bench_setup(self, opdef, op, trace, be, shape, seed, diag, lib, device):
        _, (case, pristine) = self._case(opdef, op, shape, seed, lib, device)
        dims = bind_dims(op, case.inputs, case.params)
        src, k = self._kernel(op, trace, be, dims, diag)
        return (src, k, case, copy_arrays(pristine, lib), alloc_outputs(op, dims, lib, device),
                dims, None, pristine)

    def _baseline(self, opdef, op, ins, case):
        """The op's torch reference, eager and compiled (baseline.prepare), on the kernel's
        own inputs; None for an op without one."""
        import torch

        from .baseline import prepare

        tins = {b.name: ins[b.name] if not isinstance(ins[b.name], np.ndarray)
                else torch.from_numpy(ins[b.name]) for b in op.inputs}
        return prepare(opdef, tins, case.params)


# What Triton raises when it compiles at a kernel's first launch (by class name, theirs or
# a base's: no triton import)
COMPILE_ERRORS = frozenset({"CompilationError", "OutOfResources", "PTXASError"})


def launch_failure(e: Exception, stage: str) -> CandidateError:
    """A kernel call that raised, in `stage`. A JIT (Triton) compiles at the first launch,
    at the check shape or, when that is not checked, in timing: its compile errors (ptxas
    out of registers, too much shared memory) are compile failures wherever they surface."""
    compile_ = any(c.__name__ in COMPILE_ERRORS for c in type(e).__mro__)
    return LaunchError(f"{type(e).__name__}: {e}", "compile" if compile_ else stage)


def _set_threads(n: int) -> None:
    """Fix the thread count for kernels (OpenMP) and torch alike, so times compare."""
    import os
    os.environ["OMP_NUM_THREADS"] = str(n)
    try:
        import torch
        torch.set_num_threads(n)
    except ImportError:
        pass


def evaluate(job, timing_lock=None):
    """Evaluate one job in this process (the worker calls this)."""
    return Evaluator(timing_lock).evaluate(job)
