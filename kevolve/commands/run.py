"""`kevolve run OP --backend B`: build, check against the reference, time beside torch."""

from __future__ import annotations

import json
import os

import click

from ._common import OP_HELP, Failed, console, echo, emit_json, op_argument, require_torch
from ._shapes import backend_option, load_trace, resolve, schedule_option, shape_option


@click.command("run", short_help="Build, check and time an op on a backend.",
               help=f"Build OP for a backend, check it against the reference interpreter on "
               f"fresh random inputs, and time it (median after warm-up) beside the op's "
               f"torch reference, eager and under torch.compile, in the same process (an op "
               f"without a torch reference is compared with kevolve's default schedule). "
               f"{OP_HELP}")
@op_argument
@backend_option
@schedule_option
@shape_option
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object (also when the kernel fails: then exit 1).")
@click.option("--threads", type=int, default=None,
              help="CPU threads for the kernel and for torch (default: all cores).")
@click.option("--repeat", type=int, default=15, help="Timed repeats on the CPU.")
@click.option("--seed", type=int, default=0)
@click.option("--interpret", is_flag=True, help="Triton: run in Triton's interpreter (CPU).")
def command(op_ref, backend_name, schedule_path, shape_args, as_json, threads, repeat, seed,
            interpret) -> None:
    # Before torch or a kernel loads an OpenMP runtime: idle threads sleep instead of
    # spinning, so the two runtimes timed side by side do not starve each other.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from ..api import backend, build, lower
    from ..ir.interp import bind_dims

    opts = {"interpret": True} if interpret else {}
    threads = threads or os.cpu_count() or 1
    be = backend(backend_name, **opts)
    if be.target.host_threads:
        be = backend(backend_name, **opts, threads=threads)
    gpu = be.target.on_device
    op, opdef, sd = resolve(op_ref, shape_args, gpu=gpu)
    ok, why = be.available()
    if not ok:
        raise click.UsageError(f"backend {backend_name} cannot run here: {why}")
    require_torch("kevolve run (its torch baselines)")
    case = opdef.case(sd, seed)
    dims = bind_dims(op, case.inputs, case.params)
    kernel = build(lower(op, load_trace(op, schedule_path, dims), be, dims), be)
    default = None
    if not opdef.has_reference and schedule_path is not None:  # the default is the baseline
        default = build(lower(op, load_trace(op, None, dims), be, dims), be)
    res = measure(op, opdef, case, kernel, be, gpu, threads, repeat, "cuda" if gpu else "cpu",
                  default)
    res = {"op": op.name, "backend": backend_name, "shape": sd, **res}
    if as_json:
        emit_json(res)
        _exit_on_failure(res)
        return
    from rich.table import Table
    t = Table(title=f"kevolve run {op.name} --backend {backend_name}")
    kernel_col = "estimate ms" if res.get("timing") == "estimate" else "median ms"
    torch_cols = ("torch eager ms", "torch.compile ms", "vs eager", "vs compile") \
        if opdef.has_reference else ("default schedule ms", "vs default")
    for col in ("backend", "shape", "verdict", "max error", kernel_col, *torch_cols):
        t.add_column(col)

    def fmt(x):
        return "-" if x is None else f"{x:.4g}"
    vals = (res["baseline_ms"], res["compile_ms"], res["speedup"], res["speedup_compile"]) \
        if opdef.has_reference else (res["default_ms"], res["speedup_default"])
    t.add_row(backend_name, json.dumps(sd), res["verdict"], fmt(res["max_error"]),
              fmt(res["time_ms"]), *map(fmt, vals))
    console().print(t)
    echo(f"baseline: {res['baseline']}")
    if res.get("timing") == "estimate":
        echo(f"{backend_name} runs emulated on this machine: its time is the backend's "
             "estimate for the target, not a measurement (no speedup is computed)")
    if res.get("message"):
        echo(res["message"])
    _exit_on_failure(res)


def _exit_on_failure(res: dict) -> None:
    if res["verdict"] != "ok":
        raise Failed(f"{res['op']} on {res['backend']} is wrong ({res['verdict']}): "
                     f"{res.get('message') or 'outputs differ from the reference'}")


def measure(op, opdef, case, kernel, be, gpu: bool, threads: int, repeat: int, device: str,
            default=None):
    """Check once on fresh inputs, then time the kernel beside its baselines: the torch
    reference in eager mode and under torch.compile, or (without a reference) kevolve's
    default schedule (`default`, a built kernel; None when `kernel` is the default)."""
    import torch

    from ..evaluate import baseline, timing
    from ..evaluate import check as ev
    from ..evaluate.oracle import reference
    from ..evaluate.timing_lock import NodeTimingLock
    from ..ir.interp import bind_dims

    torch.set_num_threads(threads)
    lib = be.target.tensor_lib
    dims = bind_dims(op, case.inputs, case.params)
    ins = ev.inputs_for(op, case.inputs, lib, device)
    before = ev.copy_arrays(ins, lib)
    outs = ev.alloc_outputs(op, dims, lib, device)
    kernel(ins, outs, case.params)
    if gpu:
        torch.cuda.synchronize()
    ref = reference(opdef, op, case, ins if gpu else None)
    chk = ev.compare(op, {k: ev.to_host(v) for k, v in outs.items()}, ref)
    changed = ev.unchanged(before, ins)
    res = {"verdict": "ok" if chk.ok and not changed else "correctness",
           "max_error": chk.max_error, "message": chk.message or (
               f"input {changed!r} was modified" if changed else "")}
    tins = {b.name: ins[b.name] if lib == "torch" else torch.from_numpy(ins[b.name])
            for b in op.inputs}
    timer = timing.timer(gpu, repeat)
    torch_ref = baseline.prepare(opdef, tins, case.params)  # compiles before the lock
    lock = NodeTimingLock()  # no other kevolve process times while this one does
    lock.acquire()
    try:
        t_k = timer(lambda: kernel(ins, outs, case.params))
        base = baseline.time_reference(torch_ref, gpu, repeat)
        t_d = None
        if not base:
            t_d = t_k if default is None else timer(lambda: default(ins, outs, case.params))
    finally:
        lock.release()
    res.update(baseline_ms=base.get("eager_ms"), compile_ms=base.get("compile_ms"),
               compile_error=base.get("compile_error"), default_ms=t_d,
               baseline=baseline.describe(base, t_d))
    if not be.target.measured:  # emulated: wall time means nothing
        t_k = kernel.diagnostics.get("estimate_ms")
        res.update(time_ms=t_k, speedup=None, speedup_compile=None, speedup_default=None,
                   timing="estimate")
        return res

    def ratio(b):
        return b / t_k if b and t_k else None
    res.update(time_ms=t_k, speedup=ratio(res["baseline_ms"]),
               speedup_compile=ratio(res["compile_ms"]), speedup_default=ratio(t_d),
               timing="measured")
    return res
