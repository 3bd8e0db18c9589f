"""GPU check for the C-family GPU backends: every library op at its `gpu` preset with its
default schedule, through `cuda` (nvcc -> cubin, launched by CuPy) and through `hip`
rendered for the HIP-on-CUDA path (wavefront 32, nvcc + kevolve's hip/hip_runtime.h).
Each result is checked against torch in float64 on the device and timed beside torch eager
in the same process (torch.compile too, with --compile, while the time budget lasts).
Beside the default schedule, the ops in VARIANTS also run with per-thread vector loads
and stores (`vectorize`) and shared-memory tiles (`cache`): the default trace plus a few
moves, one row each (`schedule` names it; `--variants none` skips them).

    PYTHONPATH=. python3 benchmarks/gpu_check_c.py [--backends cuda,hip] [--ops a,b]
        [--variants all|none|vector,cache_vector] [--compile] [--budget-s 270] [--out DIR]

All kernels are compiled first, in parallel. Then per op: inputs are drawn once (fresh
random values, never zeros), outputs are NaN-poisoned before each backend runs, inputs must
come back unchanged. Times are medians of triton.testing.do_bench (CUDA events, L2 flushed
between runs); the copy and bf16-matmul ceilings are measured first, in the same run. The
JSON lands in --out (default $OUT) after every op, so a run cut short keeps what it did.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

SUITE_FIRST = ("softmax", "layernorm", "swish_add", "gemm_bias_gelu", "embedding_bag",
               "jagged_sum", "jagged_softmax", "dot_interaction")


def _vec(stage, axis, width):
    return {"m": "vectorize", "stage": stage, "axis": axis, "width": width}


def _single(*stages):
    return [{"m": "reduction", "stage": s, "strategy": "single"} for s in stages]


def _cache(stage, buffer):
    return {"m": "cache", "stage": stage, "buffer": buffer, "scope": "shared"}


# op -> {variant: moves appended to the op's default trace at the gpu preset}: 16-byte
# accesses (4 f32, 8 bf16), and the row (or bag) read once into shared memory where the
# default reads it two or three times. Each fits the 48 KiB of static shared memory.
_ROWS = {"softmax": ("mx", "s", "y", "j"), "log_softmax": ("mx", "s", "y", "j")}
VARIANTS = {
    **{op: {"vector": [*_single(a, b), _vec(a, "k", 4), _vec(b, "k", 4), _vec(y, j, 4)],
            "cache_vector": [*_single(a, b), _vec(a, "k", 4), _vec(y, j, 4), _cache(a, "x")]}
       for op, (a, b, y, j) in _ROWS.items()},
    "layernorm": {"vector": [*_single("mean", "var"), _vec("mean", "k", 8),
                             _vec("var", "k", 8), _vec("y", "j", 8)],
                  "cache_vector": [*_single("mean", "var"), _vec("mean", "k", 8),
                                   _vec("y", "j", 8), _cache("mean", "x")]},
    "rmsnorm": {"vector": [*_single("rstd"), _vec("rstd", "k", 8), _vec("y", "j", 8)],
                "cache_vector": [*_single("rstd"), _vec("rstd", "k", 8), _vec("y", "j", 8),
                                 _cache("rstd", "x")]},
    "swish_add": {"vector": [_vec("out", "ii", 8)]},
    "embedding_bag": {"vector": [_vec("out", "d", 4)],
                      "cache_vector": [_vec("out", "d", 4), _cache("out", "table")]},
    "embedding_bag_mean": {"vector": [_vec("out", "d", 4)]},
    "jagged_sum": {"vector": [_vec("out", "d", 4)]},
    "jagged_mean": {"vector": [_vec("out", "d", 4)]},
    "jagged_softmax": {"vector": [_vec("y", "d", 4)]},
    "jagged_to_padded_dense": {"vector": [_vec("out", "d", 4)]},
    "jagged_dense_elementwise_add": {"vector": [_vec("out", "d", 4)]},
}


def schedules(name: str, wanted: str) -> list[str]:
    """'default', then the op's variants that --variants selects."""
    have = list(VARIANTS.get(name, {}))
    if wanted == "none":
        return ["default"]
    if wanted != "all":
        have = [v for v in have if v in wanted.split(",")]
    return ["default"] + have


def trace_for(name: str, sched: str, dims: dict):
    """None (the default trace) or the default trace plus the variant's moves."""
    if sched == "default":
        return None
    from kevolve import ops
    from kevolve.schedule import Trace, default_trace
    d = ops.get(name)
    base = default_trace(d.op_for(d.shape("gpu")), dims)
    return Trace.make(name, [m.to_dict() for m in base.moves] + VARIANTS[name][sched],
                      dict(base.decisions))


def backend_for(name: str):
    from kevolve.backends.cuda import CudaBackend
    from kevolve.backends.hip import HipBackend
    if name == "cuda":
        return CudaBackend()
    if name == "hip":
        return HipBackend(platform="nvidia")
    raise SystemExit(f"unknown backend {name!r} (cuda, hip)")


def build(job):
    from kevolve import api, ops
    name, bname, sched = job
    d = ops.get(name)
    t0 = time.time()
    try:
        be = backend_for(bname)
        sd = d.shape("gpu")
        trace = trace_for(name, sched, d.dims(sd))
        src = api.lower(d.op_for(sd), trace, be, d.dims(sd))
        kern = be.build(src)
        extra = {} if trace is None else {"moves": VARIANTS[name][sched],
                                          "vector": "kv_vcopy<" in src.text,
                                          "shared_tiles": "kv_c0[" in src.text}
        return job, kern, {"compile_s": time.time() - t0, "paths": src.meta["paths"],
                           "resources": kern.diagnostics.get("kernels", {}), **extra}
    except Exception as e:
        return job, None, {"verdict": "error", "message": f"build: {type(e).__name__}: {e}"
                           [:3000]}


def ceilings(torch, do_bench):
    n = 1 << 30
    a = torch.empty(n, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    t = do_bench(lambda a=a, b=b: b.copy_(a), warmup=25, rep=100, return_mode="median")
    copy_bps = 2 * a.numel() * 4 / (t * 1e-3)
    del a, b
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t = do_bench(lambda x=x, w=w: x @ w, warmup=25, rep=100, return_mode="median")
    return copy_bps, 2 * 8192 ** 3 / (t * 1e-3)


def make_case(name: str, seed: int):
    from kevolve import ops
    d = ops.get(name)
    return d.case("gpu", seed)


def check_op(name, case, kernels, results, args, copy_bps, mm_flops, t_start):
    import torch

    from kevolve import ops
    from kevolve.evaluate import check as ev
    from kevolve.evaluate.oracle import reference
    from kevolve.evaluate.timing import time_gpu
    from kevolve.ir.interp import bind_dims
    from kevolve.ir.roofline import floor

    d = ops.get(name)
    sd = d.shape("gpu")
    op = d.op_for(sd)
    t0 = time.time()
    params = dict(case.params)
    dims = bind_dims(op, case.inputs, params)
    fl = floor(op, case.inputs, params)
    ins = ev.inputs_for(op, case.inputs, "torch", "cuda")
    before = {k: v.clone() for k, v in ins.items()}
    ref = reference(d, op, case, ins)
    del case  # the host copies can be large
    eager_ms = time_gpu(lambda: d.torch_eager(ins, params))
    floor_ms = fl.time_s(copy_bps, mm_flops) * 1e3
    setup_s = time.time() - t0
    for job in [j for j in results if j[0] == name]:
        row = results[job]
        kern = kernels.get(job)
        row.update(floor_ms=floor_ms, eager_ms=eager_ms, setup_s=setup_s)
        if kern is None:
            continue
        try:
            outs = ev.alloc_outputs(op, dims, "torch", "cuda")
            kern(ins, outs, params)
            torch.cuda.synchronize()
            chk = ev.compare(op, {k: ev.to_host(v) for k, v in outs.items()}, ref)
            changed = next((k for k in ins if not torch.equal(before[k], ins[k])), None)
            row.update(verdict="ok" if chk.ok and not changed else "wrong",
                       max_error=chk.max_error,
                       message=chk.message or (f"modified input {changed}" if changed else ""))
            row["kevolve_ms"] = time_gpu(lambda k=kern, o=outs: k(ins, o, params))
        except Exception as e:
            row.update(verdict="error", message=f"{type(e).__name__}: {e}"[:3000])
            traceback.print_exc()
    if args.compile and time.time() - t_start < args.budget_s * 0.7:
        try:
            fn = torch.compile(lambda t: d.torch_eager(t, params))
            fn(ins)
            torch.cuda.synchronize()
            ms = time_gpu(lambda: fn(ins))
            for job in [j for j in results if j[0] == name]:
                results[job]["compile_ms"] = ms
        except Exception as e:
            print(f"torch.compile {name}: {type(e).__name__}: {e}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="")
    ap.add_argument("--backends", default="cuda,hip")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile")
    ap.add_argument("--budget-s", type=float, default=270.0,
                    help="stop starting new ops after this many seconds")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compile-only", action="store_true",
                    help="compile every kernel and print the resource table (no GPU needed)")
    ap.add_argument("--variants", default="all",
                    help="vectorize/cache schedules beside the defaults: all, none, or a "
                         f"comma list of {sorted({v for x in VARIANTS.values() for v in x})}")
    args = ap.parse_args()
    args.backends = [b for b in args.backends.split(",") if b]
    t_start = time.time()

    from kevolve import ops as O
    names = [n for n in args.ops.split(",") if n] or \
        [n for n in SUITE_FIRST if n in O.names()] + \
        [n for n in O.names() if n not in SUITE_FIRST]
    jobs = [(n, b, s) for n in names for b in args.backends
            for s in schedules(n, args.variants)]
    kernels, results = {}, {}
    with ThreadPoolExecutor(os.cpu_count() or 4) as ex:
        for job, kern, info in ex.map(build, jobs):
            results[job] = {"op": job[0], "backend": job[1], "schedule": job[2], **info}
            if kern is not None:
                kernels[job] = kern
    print(f"compiled {len(kernels)}/{len(jobs)} in {time.time() - t_start:.1f} s", flush=True)
    if args.compile_only:
        table(results.values())
        return 0 if len(kernels) == len(jobs) else 1

    import torch
    from triton.testing import do_bench
    copy_bps, mm_flops = ceilings(torch, do_bench)
    print(f"ceilings: copy {copy_bps / 1e12:.2f} TB/s, bf16 matmul {mm_flops / 1e12:.0f} "
          f"TFLOP/s", flush=True)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "gpu_check_c.json")

    def dump():
        res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "triton": __import__("triton").__version__,
               "nvcc": _nvcc_version(), "copy_bytes_per_s": copy_bps, "bf16_flops": mm_flops,
               "backends": {"cuda": "nvcc -arch=sm_90 cubin, CuPy launch",
                            "hip": "HIP source at wavefront 32, nvcc + kevolve's "
                                   "hip/hip_runtime.h, CuPy launch"},
               "rows": list(results.values()), "wall_s": time.time() - t_start}
        with open(path, "w") as f:
            json.dump(res, f, indent=1)

    # inputs for the next op are drawn on the host while the GPU works on this one
    prefetch = ThreadPoolExecutor(1)
    nxt = prefetch.submit(make_case, names[0], args.seed)
    for i, name in enumerate(names):
        case, nxt = (nxt.result() if nxt is not None else None), None
        if i + 1 < len(names) and time.time() - t_start < args.budget_s:
            nxt = prefetch.submit(make_case, names[i + 1], args.seed)
        rows = [results[j] for j in results if j[0] == name]
        if time.time() - t_start > args.budget_s:
            for row in rows:
                row.setdefault("verdict", "not run (time budget)")
            del case
            continue
        try:
            check_op(name, case, kernels, results, args, copy_bps, mm_flops, t_start)
        except Exception as e:
            for row in rows:
                row.setdefault("verdict", "error")
                row.setdefault("message", f"{type(e).__name__}: {e}"[:3000])
            traceback.print_exc()
        torch.cuda.empty_cache()
        for row in rows:
            print(json.dumps(row), flush=True)
        dump()
    smoke = loader_smoke(torch)
    dump()
    table(results.values())
    print(f"cuda-python loader smoke test: {smoke}")
    print(f"wall {time.time() - t_start:.0f} s")
    return 0 if all(r.get("verdict") == "ok" for r in results.values()) else 1


def loader_smoke(torch) -> str:
    """The other loader (cuda-python's driver API) on one op, so both paths are exercised."""
    try:
        from kevolve import api, ops
        from kevolve.backends.cuda import CudaBackend
        from kevolve.evaluate import check as ev
        from kevolve.ir import interp
        d = ops.get("softmax")
        be = CudaBackend(loader="cuda-python")
        kern = be.build(api.lower(d.op, None, be, {"M": 64, "N": 1000}))
        case = d.case({"M": 64, "N": 1000}, seed=5)
        outs = ev.alloc_outputs(d.op, {"M": 64, "N": 1000}, "torch", "cuda")
        kern(ev.inputs_for(d.op, case.inputs, "torch", "cuda"), outs, {})
        torch.cuda.synchronize()
        r = ev.compare(d.op, {k: ev.to_host(v) for k, v in outs.items()},
                       interp.run(d.op, case.inputs))
        return "ok" if r.ok else f"wrong: {r.message}"
    except Exception as e:
        return f"error: {type(e).__name__}: {e}"[:500]


def _nvcc_version() -> str:
    import subprocess
    try:
        out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
        return out.strip().splitlines()[-1]
    except Exception:
        return "?"


def table(rows) -> None:
    print(f"\n{'op':28s} {'backend':7s} {'path':9s} {'verdict':8s} {'max_err':>9s} "
          f"{'kevolve':>9s} {'eager':>9s} {'compile':>9s} {'x eager':>8s} {'%floor':>7s} "
          f"{'regs':>5s}")

    def f(x, w=9, p=4):
        return f"{x:{w}.{p}f}" if isinstance(x, float) else " " * (w - 1) + "-"
    for r in rows:
        k, e, c, fl = (r.get(x) for x in ("kevolve_ms", "eager_ms", "compile_ms", "floor_ms"))
        paths = r.get("paths") or {}
        regs = max((v.get("registers", 0) for v in (r.get("resources") or {}).values()),
                   default=0)
        path = ",".join(sorted(set(paths.values()))) or "-"
        sched = r.get("schedule", "default")
        op = r["op"] if sched == "default" else f"{r['op']}[{sched}]"
        print(f"{op:28s} {r['backend']:7s} {path:9s} {str(r.get('verdict')):8s} "
              f"{f(r.get('max_error'), 9, 2)} {f(k)} {f(e)} {f(c)} "
              f"{f(e / k if k and e else None, 8, 2)} "
              f"{f(100 * fl / k if k and fl else None, 7, 1)} {regs:5d}")


if __name__ == "__main__":
    sys.exit(main())
