"""Is gemm_bias_gelu on the H200 limited by the board's power rather than by time on the
SM? Every structure tried so far (Triton one tile per program or persistent, Gluon with an
epilogue partition) lands at 0.86-0.88 of cuBLAS with the erf GELU, and even a bias-only
epilogue that overlaps the next tile's MMAs costs 5%. If the matmul alone already runs the
card at its power limit, each instruction the epilogue adds costs energy, the clock drops
to pay for it, and the time ratio to cuBLAS follows the energy ratio, wherever the
epilogue runs.

Each kernel is run back to back for a few seconds while `nvidia-smi` samples the SM clock,
the board power and the clock-event reasons (power cap, thermal); the same kernels are also
timed with do_bench in interleaved rounds. Kernels: cuBLAS's bare matmul, cuBLAS addmm (bias
in its epilogue), cuBLASLt's fused bias + tanh GELU, torch.compile of the op, and kevolve's
archived best Triton schedule with its erfc helper as the backend renders it (`own`) or
with fits of other degrees (fitted here for |w| <= 9.5, where erfc is still a normal f32;
`fit9` is Numerical Recipes' 10-term fit), plus two diagnostics that are not the op (the
GELU replaced by 0.5 v, and a tanh GELU through tanh.approx.f32). `--persistent` adds the
launch hint to the archived schedule, `--tma` loads the dot operands through tensor
descriptors (a hand edit of the rendered module). Every variant is checked against float64.

Results (h200-gelu-power*.json): every kernel ran at the 700 W cap (687-694 W, the power-cap
reason in every sample, 1485-1635 MHz of 1980), so time per call follows energy per call:
281 mJ for cuBLAS, 289 for cuBLASLt's tanh GELU, 317 for torch.compile, 325 for kevolve
before session 6 and 310 after (persistent, 6-term fit), 300 with no GELU at all.

    PYTHONPATH=.:benchmarks python3 benchmarks/h200_gelu_power.py --out $OUT
    ... --helpers fit9,fit5,no_erf --persistent 1    # h200-gelu-power-persistent.json
    ... --helpers own,no_erf --tma                   # h200-gelu-power-tma.json
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import operator
import os
import re
import statistics
import subprocess
import threading
import time

from h200_erfc_libdevice import ARCHIVE

from kevolve.backends.triton.emitter import ERFC_HALF_P, ERFC_P, LOG2E

# Fits of log2(erfc(w)) + w^2 log2(e) - log2(t), t = 1 / (1 + w/2), for 0 <= w <= 9.5,
# lowest degree first (Lawson-weighted least squares on 1500 Chebyshev nodes, the model
# evaluated in float64 with mpmath's erfc). Largest relative error of erfc in float64:
# degree 8 2.0e-7, degree 7 6.3e-7, degree 5 7.6e-6 (now the backend's fit for bf16 and f16
# outputs, ERFC_HALF_P); degree 9 is Numerical Recipes' fit over all w (1.2e-7), the
# backend's helper for other outputs and, before session 6, for every module.
FITS = {
    9: tuple(c * LOG2E for c in ERFC_P),
    8: (-1.8252540190718471, 1.4320271256579755, 0.6373180708766878, -0.353562485536872,
        1.2568611073988498, -2.6048551859645657, 2.153414148010446, -0.8110321966004812,
        0.11508314546981298),
    7: (-1.8257915748633353, 1.4421211213319935, 0.5592435432408013, -0.027627200664106476,
        0.4500598660201382, -1.3863628499988068, 1.0516744607382795, -0.263318267536655),
    5: ERFC_HALF_P,
}


def fitted_helper(coeffs) -> str:
    """The module's `_kv_erfc` in the backend's GPU spelling, with another fit (log2 base)."""
    c = [repr(float(x)) for x in reversed(coeffs)]
    lines = ["@triton.jit", "def _kv_erfc(w):", "    z = tl.abs(w)",
             "    t = libdevice.fast_dividef(1.0, 1.0 + 0.5 * z)",
             f"    p = {c[1]} + t * {c[0]}"]
    lines += [f"    p = {x} + t * p" for x in c[2:]]
    lines += [f"    r = t * libdevice.exp2((z * {-LOG2E!r}) * z + p)",
              "    return tl.where(w >= 0, r, 2.0 - r)", ""]
    return "\n".join(lines)


# Diagnostics, not the op: the module computes 0.5 * v * _kv_erfc(-v / sqrt 2).
NO_ERF = "@triton.jit\ndef _kv_erfc(w):\n    return w * 0.0 + 1.0\n"
TANH = """@triton.jit
def _kv_erfc(w):
    v = w * -1.4142135623730951
    s = v * (0.7978845608028654 + 0.03567740813636141 * v * v)
    th = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [s],
                                   dtype=tl.float32, is_pure=True, pack=1)
    return 1.0 + th
"""



def with_tma(text: str) -> str:
    """Diagnostic: kevolve's 128x256x64 gemm_bias_gelu module with its two dot operands
    loaded through host-made tensor descriptors (TMA on sm_90, the copy engine computing the
    addresses) instead of pointer tiles; everything else as rendered."""
    a = re.search(r"(a\d+) = tl\.load\(p_A \+ \(i_\d+ \* d_K\) \+ \(k_\d+\)\)", text)
    b = re.search(r"(b\d+) = tl\.load\(p_W \+ \(k_\d+ \* d_N\) \+ \(j_\d+\)\)", text)
    ko = re.search(r"for (s_ko_\d+) in range\(0, \(d_K \+ 63\) // 64\)", text)
    sig = "def k_y(p_A, p_W, p_bias, p_y, d_K, d_M, d_N):"
    call = 'bufs["y"], d_K, d_M, d_N, num_warps'
    assert a and b and ko and sig in text and call in text and "tl.zeros([128, 256]" in text
    text = text.replace(a[0], f"{a[1]} = t_A.load([g_io * 128, {ko[1]} * 64])")
    text = text.replace(b[0], f"{b[1]} = t_W.load([{ko[1]} * 64, g_jo * 256])")
    text = text.replace(sig, sig[:-2] + ", t_A, t_W):")
    descs = ('TensorDescriptor.from_tensor(bufs["A"], [128, 64]), '
             'TensorDescriptor.from_tensor(bufs["W"], [64, 256])')
    text = text.replace(call, call.replace("num_warps", descs + ", num_warps"))
    return text.replace("import triton\n", "import triton\nfrom triton.tools.tensor_descriptor "
                        "import TensorDescriptor\n", 1)


QUERY = "timestamp,clocks.sm,power.draw,temperature.gpu"
REASONS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")


class Sampler:
    """`nvidia-smi` polling the GPU every `ms` milliseconds in the background; `window`
    returns the samples whose timestamps fall between two wall-clock times."""

    def __init__(self, ms: int = 20):
        self.fields = QUERY
        for r in REASONS:  # the field's name changed between drivers
            ok = subprocess.run(["nvidia-smi", f"--query-gpu={r}", "--format=csv"],
                                capture_output=True, text=True).returncode == 0
            if ok:
                self.fields += "," + r
                break
        self.p = subprocess.Popen(["nvidia-smi", f"--query-gpu={self.fields}",
                                   "--format=csv,noheader,nounits", "-lms", str(ms)],
                                  stdout=subprocess.PIPE, text=True)
        self.rows: list[tuple] = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self) -> None:
        for line in self.p.stdout:
            parts = [s.strip() for s in line.split(",")]
            try:
                ts = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                reason = int(parts[4], 16) if len(parts) > 4 else None
                self.rows.append((ts, float(parts[1]), float(parts[2]), float(parts[3]),
                                  reason))
            except (ValueError, IndexError):
                continue

    def window(self, t0: float, t1: float) -> dict:
        time.sleep(0.2)  # let the reader catch up
        rows = [r for r in self.rows if t0 <= r[0] <= t1]
        if not rows:
            return {"samples": 0}
        reasons = [r[4] for r in rows if r[4] is not None]
        return {"samples": len(rows),
                "sm_mhz": statistics.median(r[1] for r in rows),
                "power_w": statistics.median(r[2] for r in rows),
                "temp_c": max(r[3] for r in rows),
                "power_cap_share": (sum(1 for x in reasons if x & 0x4) / len(reasons)
                                    if reasons else None),
                "reasons_or": hex(functools.reduce(operator.or_, reasons)) if reasons else None}

    def close(self) -> None:
        self.p.terminate()


def sustained(fn, seconds: float, sampler: Sampler) -> dict:
    """Run `fn` back to back for about `seconds`; its time per call and the clock and power
    sampled after the first 0.5 s (the clock settles)."""
    import torch
    from triton.testing import do_bench

    n = max(20, int(seconds * 1e3 / do_bench(fn, warmup=10, rep=30)))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t0 = time.time()
    start.record()
    for _ in range(n):
        fn()
    end.record()
    end.synchronize()
    t1 = time.time()
    ms = start.elapsed_time(end) / n
    out = {"ms": ms, "calls": n, **sampler.window(t0 + 0.5, t1 - 0.05)}
    if out.get("power_w"):
        out["mj_per_call"] = out["power_w"] * ms
    return out


def time_and_power(runs: dict, rec, rounds: int, seconds: float) -> None:
    """do_bench in interleaved rounds (each run's time as a share of bare_mm's), then the
    power rounds."""
    from h200_erf_store_stream import interleaved

    times = interleaved(runs, rec, rounds, "")
    bare = times["bare_mm"]["ms"]
    rec("bare_over", {k: bare / v["ms"] for k, v in times.items()})
    power_rounds(runs, seconds, rec)


def bench_rounds_and_power(runs: dict, rec, rounds: int, seconds: float,
                           power: int = 2) -> None:
    """do_bench in the bench's interleaved order (a Williams design) with its median and
    spread per run, each run's median as a share of bare_mm's, then `power` power rounds."""
    from kevolve.agent.evaluate import time_gpu
    from kevolve.bench.runner import _summary, interleaved

    times = interleaved(runs, rounds, time_gpu)
    rec("rounds_ms", times)
    summary = {k: _summary(v) for k, v in times.items()}
    rec("times", {k: {"ms": ms, "spread": spread} for k, (ms, spread) in summary.items()})
    rec("bare_over", {k: summary["bare_mm"][0] / ms for k, (ms, _) in summary.items()})
    power_rounds(runs, seconds, rec, power)


def power_rounds(runs: dict, seconds: float, rec, rounds: int = 2) -> None:
    """Each run back to back for `seconds`, `rounds` times (forward, then backward order, and
    so on, so that a drift in temperature cancels), under the nvidia-smi sampler; records
    each run's samples, its time as a share of bare_mm's (over all rounds, and per round)
    and its energy per call."""
    sampler = Sampler()
    try:
        power: dict[str, list[dict]] = {k: [] for k in runs}
        order = list(runs)
        for rnd in range(rounds):
            for k in (order if rnd % 2 == 0 else order[::-1]):
                power[k].append(sustained(runs[k], seconds, sampler))
                rec("power_" + k, power[k])
        b = statistics.mean(p["ms"] for p in power["bare_mm"])
        rec("sustained_bare_over", {k: b / statistics.mean(p["ms"] for p in v)
                                    for k, v in power.items()})
        if rounds > 2:
            rec("sustained_rounds_bare_over",
                {k: [bp["ms"] / p["ms"] for bp, p in zip(power["bare_mm"], v)]
                 for k, v in power.items()})
        rec("mj_per_call", {k: statistics.mean(p.get("mj_per_call", 0) for p in v)
                            for k, v in power.items()})
    finally:
        sampler.close()


def with_launch(src, be, db: str, **hints):
    """The archived schedule `src` was lowered from, with these launch hints added,
    lowered at the same dims."""
    import json

    import kevolve
    from kevolve.agent.archive import Archive

    t = json.loads(Archive(db, readonly=True).best("gemm_bias_gelu", "triton").trace_json)
    launch = next(m for m in t["moves"] if m["m"] == "launch")
    launch.update(hints)
    plan = src.meta["plan"]
    return kevolve.lower(plan.op, t, be, plan.dims_dict)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--seconds", type=float, default=2.5)
    ap.add_argument("--helpers", default="fit9,fit8,fit7,fit5,no_erf,tanh",
                    help="erfc helpers to try in kevolve's kernel (own: as the backend "
                         "renders it; fitD: the degree-D fit)")
    ap.add_argument("--persistent", default="",
                    help="also the archived schedule with launch persistent=P, for each P "
                         "of this comma-separated list (kevolve_pP_HELPER)")
    ap.add_argument("--tma", action="store_true",
                    help="also each kevolve module with TMA operand loads (kevolve_tma_...)")
    ap.add_argument("--db", default=ARCHIVE)
    args = ap.parse_args()
    import torch
    from h200_erfc_libdevice import archived_best_gemm, kevolve_call, replace_helper
    from h200_triton_structures import recorder

    rec = recorder(os.path.join(args.out, "gelu-power.json"))
    q = subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.max.sm,power.limit,"
                        "enforced.power.limit,power.max_limit", "--format=csv"],
                       capture_output=True, text=True)
    rec("gpu", q.stdout.strip() or q.stderr.strip())
    src, be, case, (A, W, bias) = archived_best_gemm(args.db, rec)
    ins = {"A": A, "W": W, "bias": bias}
    ref = torch.nn.functional.gelu(torch.addmm(bias.double(), A.double(), W.double()))
    f = torch.compile(lambda a, w, b: torch.nn.functional.gelu(torch.addmm(b, a, w)))
    want = f(A, W, bias)
    runs = {"bare_mm": lambda: A @ W, "compile": lambda: f(A, W, bias),
            "cublas_addmm": lambda: torch.addmm(bias, A, W),
            "cublaslt_tanh_gelu": lambda: torch._addmm_activation(bias, A, W, use_gelu=True)}
    lt = torch._addmm_activation(bias, A, W, use_gelu=True)
    rec("cublaslt_tanh_gelu_err", (lt.double() - ref).abs().max().item())
    rec("cublaslt_tanh_gelu_differs", (lt != want).double().mean().item())
    known = {"own": None, **{f"fit{d}": fitted_helper(c) for d, c in FITS.items()},
             "no_erf": NO_ERF, "tanh": TANH}
    helpers = {h: known[h] for h in args.helpers.split(",")}
    srcs = {"": src}
    for p in filter(None, args.persistent.split(",")):
        srcs[f"p{p}_"] = with_launch(src, be, args.db, persistent=int(p))
    if args.tma:
        srcs.update({f"tma_{k}": dataclasses.replace(s, text=with_tma(s.text))
                     for k, s in list(srcs.items())})
    for prefix, base in srcs.items():
        for hname, h in helpers.items():
            name = ("diag_" if hname in ("no_erf", "tanh") else "kevolve_") + prefix + hname
            s = base if h is None else dataclasses.replace(
                base, text=replace_helper(base.text, h))
            try:
                runs[name] = kevolve_call(s, be, case, ins, ref, rec, name, other=want)
            except Exception as e:
                rec(name + "_error", f"{type(e).__name__}: {str(e)[:400]}")
    time_and_power(runs, rec, args.rounds, args.seconds)


if __name__ == "__main__":
    main()
