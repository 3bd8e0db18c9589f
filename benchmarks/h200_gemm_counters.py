"""What does kevolve's gemm_bias_gelu kernel do on the H200 that cuBLAS's bare matmul does
not? Earlier studies (h200_gelu_power.py) showed that every kernel of this shape runs at the
board's 700 W cap, so that time per call follows energy per call, and put kevolve's kernel
29 mJ over cuBLAS's: about 10 for the erf GELU, 19 for the rest. This one counts, with
Nsight Compute's hardware counters, where the rest goes (instructions by pipe, shared-memory
wavefronts, L2 and DRAM bytes, the launch's cluster shape), and tries a leaner epilogue: the
same erfc fit with the GELU's constants folded into it, `x Phi(x) = relu(x) - |x| Phi(-|x|)`
instead of a select and two products, and a reciprocal without the flush-to-zero add that
fast_dividef leaves (13 float instructions and 2 MUFU per output instead of 16 and 2).

Runs: cuBLAS's bare matmul, cuBLASLt's fused bias + tanh GELU, torch.compile of the op,
kevolve's archived best schedule as the backend renders it (`own`), the same module with the
lean epilogue (`lean`), each of those with TMA operand loads (`tma_`), and two diagnostics
that are not the op (bias only; GELU replaced by 0.5 v). Every run is checked against
float64 first. Then do_bench in interleaved rounds, then each run back to back for a few
seconds while nvidia-smi samples power and clock (energy per call).

Results (h200-gemm-counters.json, h200-gemm-counters-ncu.csv; session 11): cuBLAS's kernel
is nvjet's 256x128x64, 4 stages, a cluster of 2, 3 warpgroups (a TMA producer and two
consumers) on 132 persistent CTAs; one call issues 33.6M warp instructions (34.9M with its
bias epilogue, 41.2M with bias + tanh GELU) and reads 294 MB from DRAM. kevolve's kernel
issues 81.2M and reads 381 MB: 67.7M with the GELU left out (bias only), so Triton's
mainloop (cp.async loads and their address arithmetic: 6.6M LDGSTS) costs about twice
cuBLAS's instructions before any epilogue, and the erf GELU 13.5M more (12.9 per 32
outputs). TMA loads take 17M instructions off, the lean epilogue 4.5M. Sustained, of cuBLAS
(energy per call): own 0.902 (317 mJ), lean 0.906, tma_own 0.901, tma_lean 0.920 (312 mJ),
bias only 0.939 (306 mJ), cuBLASLt's tanh GELU 0.971, torch.compile 0.889; do_bench: own
0.928, lean 0.934, tma_own 0.931, tma_lean 0.941, bias only 0.924 (bare's spread 13%).

`--shipped` (h200-gemm-counters-shipped*, code at fb862e1): the variants as the backend
renders them once the Gaussian gate and bulk copies were built from those findings: erfc
(the epilogue before), gate, bulk_erfc, bulk_gate, and bias only with bulk copies. Warp
instructions 81.2M, 78.8M, 64.2M, 62.1M, 52.8M; sustained of bare 0.899, 0.900, 0.898,
0.911, 0.953; energy per call 317, 317, 317, 312, 300 mJ against cuBLAS's 285.

    PYTHONPATH=.:benchmarks python3 benchmarks/h200_gemm_counters.py --out $OUT
    bash benchmarks/h200_gemm_counters.sh        # that, then Nsight Compute over --profile
    python3 benchmarks/h200_gemm_counters.py \\
        --summarize benchmarks/results/h200-gemm-counters-ncu.csv   # the table below
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re

from h200_erfc_libdevice import ARCHIVE

from kevolve.backends.triton.emitter import ERFC_HALF_P, LOG2E

# `(0.5 * (X)) * _kv_erfc(-(((X) * 0.7071067811865475)))`, the erf GELU as the Triton
# backend renders it for X = acc + bias
GELU_RE = re.compile(r"\(0\.5 \* \((?P<x>.+?)\)\) \* _kv_erfc\(-\(\(\((?P=x)\) "
                     r"\* 0\.7071067811865475\)\)\)")
RCP = ('tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [{}], '
       'dtype=tl.float32, is_pure=True, pack=1)')


def lean_helper() -> str:
    """x Phi(x) for the erf GELU with the backend's short erfc fit: Phi(-|x|) =
    0.5 erfc(|x| / sqrt 2) = t exp2(-x^2 log2(e) / 2 + P(t) - 1), t = 1 / (1 + |x| / (2
    sqrt 2)), and x Phi(x) = relu(x) - |x| Phi(-|x|) for either sign of x."""
    c = list(ERFC_HALF_P)
    c[0] -= 1.0  # log2(0.5): the GELU's 0.5
    c = [repr(float(x)) for x in reversed(c)]
    lines = ["@triton.jit", "def _kv_gelu(v):", "    a = tl.abs(v)",
             "    t = " + RCP.format(f"1.0 + {0.5 / math.sqrt(2.0)!r} * a"),
             f"    p = {c[1]} + t * {c[0]}"]
    lines += [f"    p = {x} + t * p" for x in c[2:]]
    lines += [f"    e = libdevice.exp2((v * v) * {-0.5 * LOG2E!r} + p)",
              "    return tl.maximum(v, 0.0) - (a * t) * e", "", ""]
    return "\n".join(lines)


# `_kv_gauss_gate(X, 1.0, ...)`, the erf GELU as the backend renders it since 0943edf
GATE_RE = re.compile(r"_kv_gauss_gate\((?P<x>.+), 1\.0, 0\.35355339059327373, "
                     r"-0\.7213475204444816, -1\.0\)")


def with_erfc(text: str) -> str:
    """A module the backend renders now, with the GELU spelled as it rendered it before
    0943edf: `(0.5 * (X)) * _kv_erfc(-(((X) * 0.7071067811865475)))` and the 6-term helper."""
    from h200_gelu_power import fitted_helper

    assert len(GATE_RE.findall(text)) == 1, "gauss gate not found"
    text = GATE_RE.sub(lambda m: f"(0.5 * ({m['x']})) * _kv_erfc(-((({m['x']}) * "
                       "0.7071067811865475)))", text)
    helper = re.search(r"@triton\.jit\ndef _kv_gauss_gate\(.*?\n\n\n", text, re.S)
    return text.replace(helper[0], fitted_helper(ERFC_HALF_P) + "\n\n")


def with_epilogue(text: str, kind: str) -> str:
    """The module with its GELU expression replaced: `lean` (the helper above), `bias` (a
    diagnostic: X stored as it is)."""
    if kind == "bias" and GATE_RE.search(text):
        return GATE_RE.sub(lambda m: f"({m['x']})", text)
    assert len(GELU_RE.findall(text)) == 1, ("GELU expression not found: the first run's "
                                             "variants need the code at 17ecc94")
    if kind == "bias":
        return GELU_RE.sub(lambda m: f"({m['x']})", text)
    text = GELU_RE.sub(lambda m: f"_kv_gelu({m['x']})", text)
    return text.replace("@triton.jit\ndef _kv_erfc", lean_helper() + "@triton.jit\ndef _kv_erfc", 1)


def renamed(text: str, name: str) -> str:
    """The module with its kernel k_y called k_<name>, so Nsight Compute's rows say which
    variant they are."""
    assert text.count("def k_y(") == 1 and text.count("k_y[grid]") == 1
    return text.replace("def k_y(", f"def k_{name}(").replace("k_y[grid]", f"k_{name}[grid]")


def gelu_errors(rec) -> None:
    """Largest relative error of the lean helper against float64 GELU over [-12, 12]
    (where |GELU| >= 1e-30), and the largest absolute error."""
    import importlib.util
    import tempfile

    import torch

    text = ("import triton\nimport triton.language as tl\n"
            "from triton.language.extra import libdevice\n\n\n" + lean_helper() +
            "@triton.jit\ndef k(x, o, B: tl.constexpr):\n"
            "    r = tl.program_id(0) * B + tl.arange(0, B)\n"
            "    tl.store(o + r, _kv_gelu(tl.load(x + r)))\n")
    path = os.path.join(tempfile.mkdtemp(prefix="kevolve-gelu-"), "lean_gelu.py")
    with open(path, "w") as fh:
        fh.write(text)
    spec = importlib.util.spec_from_file_location("lean_gelu", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    k = mod.k

    x = torch.linspace(-12, 12, 1 << 20, dtype=torch.float64, device="cuda")
    xf = x.float()
    o = torch.empty_like(xf)
    k[(xf.numel() // 256,)](xf, o, B=256)
    want = torch.nn.functional.gelu(xf.double())
    big = want.abs() >= 1e-30
    rel = ((o.double() - want).abs() / want.abs().clamp_min(1e-300))[big]
    rec("lean_gelu_err", {"max_rel": rel.max().item(),
                          "max_rel_abs_x_le_4": rel[(xf.double().abs() <= 4)[big]].max().item(),
                          "max_abs": (o.double() - want).abs().max().item()})


def with_bulk(src, be):
    """The archived schedule `src` was lowered from, both operands copied in bulk (TMA
    tensor descriptors, as the backend renders `cache ... copy: bulk`)."""
    import json

    import kevolve

    plan = src.meta["plan"]
    t = json.loads(src.meta["trace"])
    t["moves"] += [{"m": "cache", "stage": "acc", "buffer": b, "scope": "shared",
                    "copy": "bulk"} for b in ("A", "W")]
    return kevolve.lower(plan.op, t, be, plan.dims_dict)


def runs_for(args, rec):
    """Every contender as a checked call, in a fixed order."""
    from h200_erfc_libdevice import archived_best_gemm, kevolve_call
    from h200_gelu_power import with_tma

    src, be, case, (A, W, bias) = archived_best_gemm(args.db, rec)
    src.meta["trace"] = json_trace(args.db)
    ins = {"A": A, "W": W, "bias": bias}
    ref, want, runs = baselines(A, W, bias)
    if args.shipped:  # the backend's own renderings (gate: the GELU since 0943edf)
        bulk = with_bulk(src, be)
        texts = {"erfc": with_erfc(src.text), "gate": src.text,
                 "bulk_erfc": with_erfc(bulk.text), "bulk_gate": bulk.text,
                 "diag_bulk_bias_only": with_epilogue(bulk.text, "bias")}
    else:  # the first run (code at 17ecc94): hand edits of the rendering then
        texts = {"own": src.text, "lean": with_epilogue(src.text, "lean")}
        texts.update({f"tma_{k}": with_tma(t) for k, t in list(texts.items())})
        texts["diag_bias_only"] = with_epilogue(src.text, "bias")
    for name, text in texts.items():
        s = dataclasses.replace(src, text=renamed(text, name))
        try:
            runs[name] = kevolve_call(s, be, case, ins, ref, rec, name, other=want)
        except Exception as e:
            rec(name + "_error", f"{type(e).__name__}: {str(e)[:400]}")
    return runs


def baselines(A, W, bias):
    """The float64 reference, torch.compile's output and the baseline calls: cuBLAS's bare
    matmul, torch.compile of the op and cuBLASLt's fused bias + tanh GELU."""
    import torch

    ref = torch.nn.functional.gelu(torch.addmm(bias.double(), A.double(), W.double()))
    f = torch.compile(lambda a, w, b: torch.nn.functional.gelu(torch.addmm(b, a, w)))
    want = f(A, W, bias)
    runs = {"bare_mm": lambda: A @ W, "compile": lambda: f(A, W, bias),
            "cublaslt_tanh_gelu": lambda: torch._addmm_activation(bias, A, W, use_gelu=True)}
    return ref, want, runs


def json_trace(db: str) -> str:
    from kevolve.agent.archive import Archive

    return Archive(db, readonly=True).best("gemm_bias_gelu", "triton").trace_json


def profile(args) -> None:
    """One call of each contender between cudaProfilerStart and Stop, after a warm-up, for
    `ncu --profile-from-start off`; the order goes to stdout."""
    profile_calls(runs_for(args, lambda k, v: None))


def profile_calls(runs: dict) -> None:
    """Each run once between cudaProfilerStart and Stop, after a warm-up of all."""
    import torch

    for fn in runs.values():
        fn()
    torch.cuda.synchronize()
    for name, fn in runs.items():
        print("profiling", name, flush=True)
        torch.cuda.cudart().cudaProfilerStart()
        fn()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()


# Nsight Compute metrics the summary reports, with its column names
COUNTERS = (("gpu__time_duration.sum", "us", 1e-3),
            ("sm__cycles_elapsed.avg.per_second", "MHz", 1e-6),
            ("smsp__inst_executed.sum", "warp inst M", 1e-6),
            ("smsp__inst_executed_op_ldgsts.sum", "cp.async M", 1e-6),
            ("smsp__inst_executed_op_tma_ld.sum", "TMA loads k", 1e-3),
            ("smsp__sass_inst_executed_op_shared_gmma.sum", "wgmma M", 1e-6),
            ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "smem wavefronts M", 1e-6),
            ("dram__bytes_read.sum", "DRAM read MB", 1e-6),
            ("dram__bytes_write.sum", "DRAM write MB", 1e-6),
            ("lts__t_sector_hit_rate.pct", "L2 hit %", 1.0),
            ("launch__registers_per_thread", "registers", 1.0),
            ("launch__cluster_dim_x", "cluster x", 1.0))


def summarize(path: str) -> str:
    """A markdown table of the COUNTERS for every kernel in an `ncu --csv --page raw` file."""
    import csv

    with open(path) as f:
        rows = list(csv.reader(f))
    head, data = rows[0], rows[2:]  # the second row holds the units
    col = {h: i for i, h in enumerate(head)}
    lines = ["| kernel | grid x block | " + " | ".join(c[1] for c in COUNTERS) + " |",
             "| --- | --- |" + " ---: |" * len(COUNTERS)]
    for r in data:
        cells = []
        for metric, _, scale in COUNTERS:
            v = float(r[col[metric]].replace(",", "")) * scale
            cells.append(f"{v:.3g}" if v < 1000 else f"{v:.0f}")
        lines.append(f"| {r[col['Kernel Name']]} | {r[col['Grid Size']]} x "
                     f"{r[col['Block Size']]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def study_args() -> argparse.ArgumentParser:
    """The options every gemm study takes: where results go, timing rounds, seconds back
    to back per run under nvidia-smi, the archive, and --profile (one call each, for ncu)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--db", default=ARCHIVE)
    ap.add_argument("--profile", action="store_true")
    return ap


def main() -> None:
    ap = study_args()
    ap.add_argument("--summarize", metavar="CSV",
                    help="print the counters of an ncu CSV as a table, and stop")
    ap.add_argument("--shipped", action="store_true",
                    help="the variants as the backend renders them now (erfc, gate, bulk_*) "
                         "instead of the first run's hand edits")
    args = ap.parse_args()
    if args.summarize:
        return print(summarize(args.summarize))
    if args.profile:
        return profile(args)
    from h200_gelu_power import time_and_power
    from h200_triton_structures import recorder

    rec = recorder(os.path.join(args.out, "gemm-counters-shipped.json" if args.shipped
                                else "gemm-counters.json"))
    gelu_errors(rec)
    runs = runs_for(args, rec)
    time_and_power(runs, rec, args.rounds, args.seconds)


if __name__ == "__main__":
    main()
