"""Side by side in one process: torch eager, torch.compile and kevolve's best schedule (and
optionally other backends' defaults), each checked first, then timed in interleaved rounds
(each a median after warm-up; the report shows the median over rounds and their spread;
the order changes from round to round, see kevolve.evaluate.timing.orders) and checked
again on the outputs their timed calls left, against the roofline floor from measured
ceilings."""

from __future__ import annotations

import json
import os
import time
import traceback

import numpy as np

from ..evaluate import check as ev
from ..evaluate import timing
from ..evaluate.oracle import reference
from ..evaluate.timing import interleaved
from .suites import SUITES, preset


def _summary(ts: list[float]) -> tuple[float, float]:
    """(median, spread): the spread is (max - min) / median over the rounds."""
    med = float(np.median(ts))
    return med, (max(ts) - min(ts)) / max(med, 1e-12)


def bare_matmul(op):
    """(A, B) input names when the op contains sum_k A[i, k] * B[k, j] over two inputs: the
    bare matrix product a library (cuBLAS) would run, the yardstick for fused epilogues."""
    from ..ir.nodes import AxisRef, Load, product_factors, walk

    names = {b.name for b in op.inputs}
    for s in op.stages:
        for n in walk(s.body):
            if (ab := product_factors(n)) is not None:
                a, b = ab
                if isinstance(a, Load) and isinstance(b, Load) and a.buffer.name in names \
                        and b.buffer.name in names and a.buffer.ndim == b.buffer.ndim == 2:
                    k = n.axes[0].name
                    ia, ib = a.index, b.index
                    if all(isinstance(x, AxisRef) for x in ia + ib) and ia[1].axis.name == k \
                            and ib[0].axis.name == k:
                        return a.buffer.name, b.buffer.name
    return None


def within(best_so_far: list, frac: float = 0.05) -> int | None:
    """Candidates evaluated when the best-so-far first came within `frac` of the final best
    (search efficiency)."""
    vals = [x for x in best_so_far if x]
    if not vals:
        return None
    final = min(vals)
    for i, x in enumerate(best_so_far, 1):
        if x and x <= final * (1 + frac):
            return i
    return None


def bench_op(name: str, suite: str, backend: str, gpu: bool, ceilings: dict, compile_: bool,
             also: tuple[str, ...], repeat: int, seed: int = 0, contenders: tuple = (),
             rounds: int = 3, with_default: bool = False) -> dict:
    """One op's row. `contenders` are the archive's (candidate id, trace JSON), fastest
    first: with several, each is timed once and the fastest correct one is measured; with
    none, the default schedule is. `with_default`: the default schedule is timed beside the
    archive's pick too (`default_ms`; a pick that is the default is not timed twice, and
    `default_is_pick` says so)."""
    import torch

    import kevolve

    from ..ir.interp import bind_dims
    from ..ir.roofline import floor
    from ..ops import resolve
    from ..schedule import Trace, default_trace

    d = resolve(name)
    sd = d.shape(preset(suite, gpu))
    op = d.op_for(sd)
    device = "cuda" if gpu else "cpu"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    timer = timing.timer(gpu, repeat)
    case = d.case(sd, seed)
    dims = bind_dims(op, case.inputs, case.params)
    fl = floor(op, case.inputs, case.params)
    floor_ms = fl.time_s(ceilings["copy_bytes_per_s"], ceilings["matmul_flops"]) * 1e3
    row = {"op": d.name, "shape": sd, "floor_ms": floor_ms, "floor_bytes": fl.bytes,
           "floor_flops": fl.flops, "reference": d.has_reference}
    tins = ev.inputs_for(op, case.inputs, "torch", device)
    ref = reference(d, op, case, tins if gpu else None)

    def eager():
        return d.torch_eager(tins, case.params)
    # timed last, in interleaved rounds; without a torch reference the baseline is
    # kevolve's default schedule (the "default" contender below)
    calls = {"eager": eager} if d.has_reference else {}
    mm = bare_matmul(op)
    if mm is not None:
        a, b = tins[mm[0]], tins[mm[1]]
        calls["bare_matmul"] = lambda: a @ b
    if compile_ and d.has_reference:
        try:
            fn = torch.compile(lambda t: d.torch_eager(t, case.params))
            t0 = time.time()
            with torch.no_grad():
                fn(tins)
            sync()
            row["compile_s"] = time.time() - t0
            calls["compile"] = lambda: fn(tins)
        except Exception as e:  # a baseline that fails is reported, not fatal
            row["compile_error"] = f"{type(e).__name__}: {e}"[:500]

    shared_ins: dict = {}  # one copy of the inputs per tensor library, read by every kernel

    def prepare(be_name: str, trace: str) -> tuple:
        """Build and check against the reference: (the kernel's call if it is correct,
        verdict / max_error / message, a check of the outputs its latest call left)."""
        try:
            be = kevolve.backend(be_name)
            k = kevolve.build(kevolve.lower(op, trace, be, dims), be)
            lib = be.target.tensor_lib
            if lib not in shared_ins:
                shared_ins[lib] = ev.inputs_for(op, case.inputs, lib, device)
            ins = shared_ins[lib]
            outs = ev.alloc_outputs(op, dims, lib, device)
            k(ins, outs, case.params)
            sync()

            def check(outs=outs):
                sync()
                return ev.compare(op, {n: ev.to_host(v) for n, v in outs.items()}, ref)
            chk = check()
            info = {"verdict": "ok" if chk.ok else "wrong", "max_error": chk.max_error}
            if not chk.ok:
                return None, {**info, "message": chk.message}, None
            return (lambda k=k, ins=ins, outs=outs: k(ins, outs, case.params)), info, check
        except Exception as e:
            traceback.print_exc()
            return None, {"verdict": "error", "stage": getattr(e, "stage", None),
                          "message": f"{type(e).__name__}: {e}"[:800]}, None

    def after_timing(check, info: dict) -> bool:
        """Are the outputs the timed calls left still right? A kernel that is right once
        but not when called again (outputs it accumulates into, a race) gets no time."""
        chk = check()
        if chk.ok:
            return True
        info.update(verdict="wrong", max_error=chk.max_error,
                    message=f"after timing: {chk.message}"[:800])
        return False

    pick = contenders[0] if contenders else None
    prepared: dict = {}  # candidate id -> prepare()'s result, while the contenders are timed
    if len(contenders) > 1:
        # The archive's times may come from older generated code: build and check every
        # contender, time each once here, back to back (a timing right after a build
        # starts on an idle, cooler GPU), the few fastest again in interleaved rounds (one
        # timing each favours whichever was lucky, by up to ~15% for a GEMM at a GPU's
        # power limit), then measure the one fastest there like every other kernel.
        prepared = {cand: prepare(backend, tj) for cand, tj in contenders}
        calls_once = {cand: b[0] for cand, b in prepared.items() if b[0] is not None}

        def screen_failed(cand, e):
            prepared[cand][1].update(verdict="error",
                                     message=f"timing: {type(e).__name__}: {e}"[:800])
        with torch.no_grad():
            once = interleaved(calls_once, 1, timer, screen_failed)
        row["contenders"] = []
        for cand, _ in contenders:
            call, info, check = prepared[cand]
            ms = once[cand][0] if once.get(cand) else None
            if ms is not None and not after_timing(check, info):
                ms = None
            row["contenders"].append({"candidate": cand, "verdict": info["verdict"],
                                      "max_error": info.get("max_error"),
                                      "message": info.get("message"), "ms": ms})
        ok = sorted((c for c in row["contenders"] if c["verdict"] == "ok" and c["ms"]),
                    key=lambda c: c["ms"])
        if ok:
            best = _finalist(ok[:FINALISTS], prepared, timer, rounds)
            pick = next(c for c in contenders if c[0] == best)
    row.update(candidate=pick[0] if pick else None,
               trace=json.loads(pick[1]) if pick else None,
               trace_source="archive" if pick else "default")
    checks = {}
    entries = [("kevolve", backend, pick and pick[1])] + [(b, b, None) for b in also]
    if pick and (with_default or not d.has_reference):
        # no torch reference: the default schedule is the baseline; with_default: it is
        # timed beside the search's pick, unless the pick is the default itself
        if default_trace(op, dims).to_json() == Trace.from_json(pick[1]).to_json():
            row["default_is_pick"] = True
        else:
            entries.append(("default", backend, None))
    for key, be_name, tj in entries:
        if key == "kevolve" and pick and pick[0] in prepared:
            call, info, checks[key] = prepared.pop(pick[0])  # built and checked already
            if info["verdict"] != "ok":  # wrong after its screening timing, or it failed
                call = None
        else:
            call, info, checks[key] = prepare(be_name, tj or default_trace(op, dims).to_json())
        row.update({f"{key}_{f}": v for f, v in info.items()})
        if call is not None:
            calls[key] = call
    prepared.clear()  # the contenders that lost: free their buffers before the rounds

    # Interleaved rounds: slow drifts of the machine (clocks, temperature) fall on every
    # contestant alike, and each follows every other equally often.
    def timing_failed(key, e):
        row[f"{key}_verdict"] = "error"
        row[f"{key}_message"] = f"timing: {type(e).__name__}: {e}"[:800]
    with torch.no_grad():
        times = interleaved(calls, rounds, timer, timing_failed)
    for key, check in checks.items():
        if key in calls and row.get(f"{key}_verdict") == "ok":
            info = {}
            if not after_timing(check, info):
                row.update({f"{key}_{f}": v for f, v in info.items()})
                times.pop(key)
    for key, ts in times.items():
        if len(ts) == rounds:
            row[f"{key}_ms"], row[f"{key}_spread"] = _summary(ts)
            row[f"{key}_rounds_ms"] = ts  # in round order: which rounds moved, and whom
    k_ms = row.get("kevolve_ms")
    if k_ms:
        row["pct_floor"] = 100 * floor_ms / k_ms
        if row.get("eager_ms"):
            row["speedup_eager"] = row["eager_ms"] / k_ms
        if row.get("default_ms"):
            row["speedup_default"] = row["default_ms"] / k_ms
        if row.get("compile_ms"):
            row["speedup_compile"] = row["compile_ms"] / k_ms
        row["achieved_bytes_per_s"] = fl.bytes / (k_ms * 1e-3)
    for key in ("eager", "compile"):
        if row.get(f"{key}_ms"):
            row[f"{key}_pct_floor"] = 100 * floor_ms / row[f"{key}_ms"]
    return row


FINALISTS = 3  # contenders timed again in interleaved rounds before one is picked


def _finalist(ranked: list, prepared: dict, timer, rounds: int):
    """The candidate id fastest over `rounds` interleaved timings of the `ranked`
    contenders, whose prepare() results (call or None, info, check) are in `prepared`.
    Each timed contender gets `finalist_ms`, the median. With one contender or one round
    there is nothing to time again."""
    import torch

    if len(ranked) < 2 or rounds < 2:
        return ranked[0]["candidate"]
    calls = {c["candidate"]: prepared[c["candidate"]][0] for c in ranked}  # timed once: built
    with torch.no_grad():
        times = interleaved(calls, rounds, timer)
    for c in ranked:
        if times.get(c["candidate"]):
            c["finalist_ms"] = float(np.median(times[c["candidate"]]))
            c["finalist_rounds_ms"] = times[c["candidate"]]
    timed = [c for c in ranked if "finalist_ms" in c]
    return min(timed, key=lambda c: c["finalist_ms"])["candidate"] if timed \
        else ranked[0]["candidate"]


def _options(be, threads: int | None) -> dict:
    """Backend options of the suite's searches: the thread count, for a backend whose
    kernels run on host threads."""
    return {"threads": threads} if be.target.host_threads and threads else {}


def _archived(row: dict, tops: list, cfg, hardware: str, toolchain: dict) -> None:
    """Beside each archive contender's time here, its archived time, the run hash of the
    code its trace renders to here (`source_hash`: which code a result file's times are
    of, whatever the checkout's git metadata says) and whether the archived time was
    measured on that code (`same_code`: not when the archive's search ran at another shape,
    or with another kevolve, template or toolchain)."""
    from .. import api, pipeline
    from ..archive import RunKey
    from ..errors import KevolveError
    from ..ops import resolve

    if not tops:
        return
    opdef = resolve(cfg.op)
    shape = {**opdef.shape(cfg.shape), **cfg.shape_overrides}
    op, dims = opdef.op_for(shape), opdef.dims(shape)
    be = api.backend(cfg.backend, **cfg.backend_options)

    def code(trace_json: str) -> str | None:
        """The run hash of the code the trace renders to here (None: it does not)."""
        try:
            src = pipeline.compile(op, trace_json, dims, be).source
        except KevolveError:
            return None
        return RunKey(src.hash, cfg.backend, toolchain, hardware).stable_hash()

    here = {s.candidate_id: code(s.trace_json) for s in tops}
    known = {s.candidate_id: {"archived_ms": s.result.time_ms, "source_hash": here[s.candidate_id],
                              "same_code": here[s.candidate_id] == s.result.source_hash}
             for s in tops}
    for c in row.get("contenders", ()):
        c.update(known.get(c["candidate"], {}))
    if row.get("candidate") in known:
        row.update({f"kevolve_{k}": v for k, v in known[row["candidate"]].items()})


def run_suite(suite: str, backend: str, *, db: str | None, budget: int, from_archive: bool,
              workers: int, threads: int | None, compile_: bool = True,
              also: tuple[str, ...] = (), ops: tuple[str, ...] = (), repeat: int = 20,
              on_op=None, top: int = 1, rounds: int = 3,
              op_dbs: dict[str, str] | None = None) -> dict:
    """The suite's rows, each op searched (unless `from_archive`) and timed from its
    archive: `op_dbs[op]` where given, else `db`. The aten suite (catalog ops, `ops`
    given) also times each op's default schedule, records an op whose search or bench
    failed as a row instead of stopping, and adds its summary (`aten`: fast_1, geomeans,
    the ops that lose by cause; kevolve.bench.catalog)."""
    from .. import api
    from ..archive import DEFAULT_PATH as DEFAULT_DB
    from ..archive import Archive
    from ..errors import KevolveError
    from ..evaluate.hardware import hardware_name, measure_ceilings, toolchain
    from ..ops import resolve
    from ..search import SearchConfig, evolve
    from . import catalog

    options = _options(api.backend(backend), threads)
    be = api.backend(backend, **options)
    be.configure_process()  # before torch.compile, which sets its own ptxas for the process
    gpu = be.target.on_device
    if not gpu and threads:
        import torch
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)
    hw = hardware_name(gpu, threads)
    ceilings = measure_ceilings(gpu, threads)
    db = db or DEFAULT_DB
    names = ops or SUITES[suite]
    aten = suite == "aten"
    shape = preset(suite, gpu)
    out = {"suite": suite, "backend": backend, "hardware": hw, "ceilings": ceilings,
           "toolchain": toolchain(be), "rows": [], "history": {}, "rounds": rounds,
           "preset": shape, "budget": 0 if from_archive else budget,
           "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    for name in names:
        op_db = (op_dbs or {}).get(name, db)
        search_error = None
        if not from_archive and budget > 0:
            try:
                evolve(SearchConfig(name, backend, budget=budget, workers=workers, db=op_db,
                                    shape=shape, threads=threads, backend_options=options))
            except KevolveError as e:
                if not aten:
                    raise
                search_error = f"{type(e).__name__}: {e}"[:800]
        d = resolve(name)
        archived = d.op.name  # the archive's name of the op (a catalog op's lacks `aten.`)
        arch = Archive(op_db) if os.path.exists(op_db) else None
        try:
            tops = arch.fastest(archived, backend, hw, max(1, top)) if arch is not None else []
            hist = arch.history(archived, backend, hw) if arch is not None else []
        finally:
            if arch is not None:
                arch.close()
        out["history"][name] = [h["best_ms"] for h in hist]
        try:
            row = bench_op(name, suite, backend, gpu, ceilings, compile_, also, repeat,
                           contenders=tuple((s.candidate_id, s.trace_json) for s in tops),
                           rounds=rounds, with_default=aten)
        except Exception as e:  # an op the harness cannot bench is a row that says why
            if not aten:
                raise
            traceback.print_exc()
            row = {"op": d.name, "kevolve_verdict": "error", "kevolve_stage": "bench",
                   "kevolve_message": f"{type(e).__name__}: {e}"[:800]}
        if search_error:
            row["search_error"] = search_error
        _archived(row, tops, SearchConfig(name, backend, shape=shape, threads=threads,
                                          backend_options=options), hw, out["toolchain"])
        row["searched"] = len(hist)
        row["archive"] = os.path.basename(op_db)  # which archive the row's search is in
        row["within_5pct_at"] = within(out["history"][name])
        if row.get("bare_matmul_ms") and row.get("kevolve_ms"):
            row["bare_over_kevolve"] = row["bare_matmul_ms"] / row["kevolve_ms"]
        if aten:
            row.update(catalog.facts(name, row, be, shape))
        out["rows"].append(row)
        if on_op:
            on_op(row, out)
    sp = [r["speedup_compile"] for r in out["rows"] if r.get("speedup_compile")]
    out["geomean_speedup_compile"] = float(np.exp(np.mean(np.log(sp)))) if sp else None
    se = [r["speedup_eager"] for r in out["rows"] if r.get("speedup_eager")]
    out["geomean_speedup_eager"] = float(np.exp(np.mean(np.log(se)))) if se else None
    if aten:
        out["aten"] = catalog.summary(out["rows"], ceilings)
    return out
