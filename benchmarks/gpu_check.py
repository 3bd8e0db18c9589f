"""GPU check: every library op at its `gpu` preset with its default schedule on a GPU
backend (triton by default): correct against torch in float64 on the device, and timed
beside torch eager (and torch.compile with --compile) in the same process.

    PYTHONPATH=. python3 benchmarks/gpu_check.py [--ops a,b] [--compile] [--out DIR]

Times are medians of triton.testing.do_bench (CUDA events, L2 flushed between runs).
The two ceilings (device-to-device copy, bf16 matmul) are measured first, in the same run,
and each time is also given as a percentage of the op's roofline floor.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback


def check_op(d, args, copy_bps: float, mm_flops: float) -> dict:
    import torch

    import kevolve
    from kevolve.evaluate import check as ev
    from kevolve.evaluate.oracle import reference
    from kevolve.evaluate.timing import time_gpu
    from kevolve.ir.interp import bind_dims
    from kevolve.ir.roofline import floor

    sd = d.shape("gpu")
    op = d.op_for(sd)
    t1 = time.time()
    case = d.case(sd, args.seed)
    dims = bind_dims(op, case.inputs, case.params)
    fl = floor(op, case.inputs, case.params)
    kern = kevolve.build(kevolve.lower(op, None, args.backend, dims))
    ins = ev.inputs_for(op, case.inputs, "torch", "cuda")
    outs = ev.alloc_outputs(op, dims, "torch", "cuda")
    before = {k: v.clone() for k, v in ins.items()}
    kern(ins, outs, case.params)
    torch.cuda.synchronize()
    ref = reference(d, op, case, ins)
    chk = ev.compare(op, {k: ev.to_host(v) for k, v in outs.items()}, ref)
    changed = ev.unchanged(before, ins)
    del before
    row = dict(verdict="ok" if chk.ok and not changed else "wrong", max_error=chk.max_error,
               message=chk.message or (f"modified input {changed}" if changed else ""),
               floor_bytes=fl.bytes, floor_flops=fl.flops,
               floor_ms=fl.time_s(copy_bps, mm_flops) * 1e3, setup_s=time.time() - t1)
    row["kevolve_ms"] = time_gpu(lambda: kern(ins, outs, case.params))
    row["eager_ms"] = time_gpu(lambda: d.torch_eager(ins, case.params))
    if args.compile:
        fn = torch.compile(lambda t: d.torch_eager(t, case.params))
        t2 = time.time()
        fn(ins)
        torch.cuda.synchronize()
        row["compile_s"] = time.time() - t2
        row["compile_ms"] = time_gpu(lambda: fn(ins))
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="")
    ap.add_argument("--backend", default="triton")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch

    from kevolve import ops as O

    names = [n for n in args.ops.split(",") if n] or O.names()
    t0 = time.time()
    from kevolve.evaluate.hardware import measure_ceilings

    c = measure_ceilings(gpu=True)
    copy_bps, mm_flops = c["copy_bytes_per_s"], c["matmul_flops"]
    print(f"ceilings: copy {copy_bps / 1e12:.2f} TB/s, bf16 matmul {mm_flops / 1e12:.0f} "
          f"TFLOP/s ({time.time() - t0:.1f} s)", flush=True)
    rows = []
    for name in names:
        row = {"op": name}
        try:
            row.update(check_op(O.get(name), args, copy_bps, mm_flops))
        except Exception as e:  # one op failing must not hide the others
            row.update(verdict="error", message=f"{type(e).__name__}: {e}"[:2000])
            traceback.print_exc()
        torch.cuda.empty_cache()
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "triton": __import__("triton").__version__, "backend": args.backend,
              "copy_bytes_per_s": copy_bps, "bf16_flops": mm_flops, "rows": rows}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"gpu_check_{args.backend}.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"\n{'op':28s} {'verdict':8s} {'max_err':>9s} {'kevolve':>9s} {'eager':>9s} "
          f"{'compile':>9s} {'floor':>8s} {'%floor':>7s} {'x eager':>8s} {'x comp':>7s}")
    for r in rows:
        k, e, c = r.get("kevolve_ms"), r.get("eager_ms"), r.get("compile_ms")
        fl = r.get("floor_ms")

        def f(x, w=9, p=4):
            return f"{x:{w}.{p}f}" if isinstance(x, float) else " " * (w - 1) + "-"
        print(f"{r['op']:28s} {r['verdict']:8s} {f(r.get('max_error'), 9, 2)} {f(k)} {f(e)} "
              f"{f(c)} {f(fl, 8)} {f(100 * fl / k if k and fl else None, 7, 1)} "
              f"{f(e / k if k and e else None, 8, 2)} {f(c / k if k and c else None, 7, 2)}")
    return 0 if all(r["verdict"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
