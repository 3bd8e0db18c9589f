"""What does gemm_bias_gelu's GELU cost on the H200 now, and does a shorter erfc fit for
bf16 outputs buy part of it back? (session 16)

The ranking's gemm kernel (candidate 283 of h200-gemm-resident-archive.db: 128x256x64,
8 warps, one persistent program per multiprocessor pipelined across tiles, both operands
and the output copied in bulk) ran at 0.9475 of cuBLAS's bare matmul. Its epilogue, in the
SASS ptxas makes of it for sm_90 (`kevolve.backends.triton.aot.compile_aot`, no GPU needed),
spends per output 8 FFMA, 2 FMUL, 2 FMNMX, 2 FADD, 2 MUFU and half an F2FP: 16.5
instructions, 5 of them the Horner steps of the 6-term fit the backend gives modules with
bf16 or f16 outputs (relative error of the GELU 1.8e-5 in f32). A 4-term fit (degree 3 in
t, minimax over 0 <= w <= 9.5, this file's FIT3) has 2.6e-4, which is 7.4 times under
half a bf16 ulp but only 1.9 times under half an f16 one; on normal samples of the
pre-activation it leaves about 2% of bf16 outputs one ulp from the correctly rounded
value against 0.06% with 6 terms. Two fewer FFMA per output are about 12% of the GELU's
instructions; session 6 measured about a quarter of a point of bare per FFMA per output.

Runs, each checked against float64 first (largest error, and the share of outputs that
are not the correctly rounded bf16 of the float64 GELU): cuBLAS's bare matmul, cuBLASLt's
fused bias + tanh GELU, candidate 283 as the backend renders it (`own`), the same module
with the 4-term fit in its Gaussian gate (`fit3`), and a diagnostic that is not the op
(`bias_only`: the gate returns its argument, so the kernel adds the bias and rounds).
Then do_bench in interleaved rounds, then each back to back under nvidia-smi (energy per
call); `--profile` runs one call of each for Nsight Compute (h200_gate_fit.sh). `NAME_differs`
is the share of outputs that are not the correctly rounded value. The gate the backend
rendered in sessions 16 and 17, their `own`, is `t_form` now; `own` is the one-exp2 gate.

Results (session 16, h200-gate-fit.json, h200-gate-fit-ncu.csv; bash h200_gate_fit.sh):
do_bench of cuBLAS's bare matmul (9 rounds, bare's spread 19%): own 0.947, fit3 0.936,
bias_only 0.991, cuBLASLt's tanh GELU 0.987; sustained 0.943, 0.945, 0.980, 0.972; energy
per call 302, 301, 291, 293 mJ against 285. Outputs not the correctly rounded bf16: own
0.27%, fit3 2.0%, cuBLASLt 9.5%. Warp instructions per call 73.2M, 71.1M, 60.1M (cuBLAS
33.6M, 41.2M with its GELU). So the GELU costs 3.7 points sustained, and two FFMA fewer
per output buy 0.2 of them (session 16 read that as the 2 MUFU per output setting the
time as much as the rest; session 17's run below does not bear that out). fit3 was not
taken into the backend.

Session 17 asked whether the special-function unit is what the GELU waits on: the gate
with one exp2 and no reciprocal (`w10`: relu(x) - a exp2(p(a)), p of degree 10 in the
clamped |x|, 15.5 instructions and 1 MUFU per output in the SASS against 16.5 and 2;
`w9`: degree 9, 14.5 and 1), as accurate as the t form (outputs not the correctly rounded
bf16: t form 0.27%, w10 0.28%, w9 0.35%). Results (h200-gate-fit-onemufu.json,
h200-gate-fit-onemufu-ncu.csv; `bash h200_gate_fit.sh`, this run's variants): energy per
call 297.3 (t form), 297.4 (w10), 297.2 (w9) mJ against bare's 281.3 and bias_only's 287.6;
sustained 0.941, 0.946, 0.946 of bare; do_bench (bare's spread 12%) 0.962, 0.945, 0.939;
warp instructions 73.2M, 72.2M, 71.1M. Half the MUFU and up to 2 fewer instructions per
output moved neither the energy nor the time beyond that run's spread (the t form ran at
0.943 sustained in session 16). A second run with 4 power rounds of 3 s and 15 do_bench rounds,
degree 8 added as a diagnostic (h200-gate-fit-dose.json, `--variants session17_dose
--rounds 15 --seconds 3 --power-rounds 4`) resolved them: sustained of bare 0.939 for the t
form (0.937-0.940 over the rounds), 0.945 for w10 (0.944-0.947), 0.947 for w9, 0.948 for
w8, 0.979 without the GELU; energy per call 307.0, 305.1, 304.6, 304.1, 294.9 mJ (bare
288.0); do_bench 0.938, 0.942, 0.944, 0.945. One MUFU and one instruction fewer per output
are worth 0.6 points, each further FFMA about 0.15. W10, as accurate as the t form, has
been the backend's gate for bf16 and f16 outputs since then (GATE_HALF_W).

Session 18 fitted the exponent only where outputs need relative accuracy: degree 7 over
0 <= w <= 4.5 (`own` now, the backend's GATE_HALF_W; 12.5 instructions per output, 3 FFMA
fewer than w10), as accurate there as w10 and under the true value past it, beside w10 and
`w6`, a diagnostic of degree 6 over 0 <= w <= 3 (`--variants session18 --rounds 15
--seconds 3 --power-rounds 4`, h200-gate-fit-deg7.json): sustained of bare 0.949 for own
(0.949-0.952 over the 4 rounds), 0.944 for w10 (0.943-0.946), 0.949 for w6, 0.979 without
the GELU (cuBLASLt's tanh GELU 0.969); energy per call 306.6, 308.5, 306.7, 297.3 mJ
(bare 291.0); do_bench, 15 rounds (bare's spread 10%): 0.953, 0.954, 0.951, 0.986. Outputs
not the correctly rounded bf16: own 0.26%, w10 0.28%, w6 0.26%. So 3 FFMA fewer per output
bought 0.5 points and a fourth nothing measurable.

    PYTHONPATH=.:benchmarks python3 benchmarks/h200_gate_fit.py --db ARCHIVE --out $OUT
    PYTHONPATH=.:benchmarks python3 benchmarks/h200_gate_fit.py --db ARCHIVE --sass  # no GPU
    (--variants session16, session17, session17_dose or session18 for those runs' variants)
"""

from __future__ import annotations

import dataclasses
import os
import re

from kevolve.backends.triton.emitter import ERFC_HALF_P

# P(t) in log2 units, lowest degree first: a minimax fit (linear programme over 4000
# Chebyshev nodes) of log2(erfc(w)) + w^2 log2(e) - log2(t), t = 1 / (1 + w / 2), over
# 0 <= w <= 9.5, as the backend's ERFC_HALF_P is at degree 5. Largest error 3.7e-4 in
# log2 units, 2.6e-4 relative in erfc; in f32 the gate's GELU is within 2.63e-4 of float64.
FIT3 = (-1.8140482908138542, 1.3155755986821414, 1.0005859517387368, -0.5017534502313761)

def _gate_lines(text: str) -> tuple[list[str], int]:
    """The module's lines and the index of its Gaussian gate's `def` line."""
    lines = text.splitlines(keepends=True)
    at = [i for i, ln in enumerate(lines) if ln.startswith("def _kv_gauss_gate(")]
    assert len(at) == 1, "no Gaussian gate in the module"
    return lines, at[0]


def _with_body(text: str, body) -> str:
    """The module with its Gaussian gate's body (after the docstring, to the return line)
    replaced by what `body` writes with `exp2` and `rcp` spelled as
    the module spells them (libdevice's on a GPU, plain ones for the interpreter): `body`
    takes those spellings as format strings and returns the lines."""
    lines, d = _gate_lines(text)
    end = next(i for i in range(d, len(lines)) if lines[i].startswith("    return "))
    doc = next(i for i in range(d + 1, len(lines)) if lines[i].rstrip().endswith('"""'))
    gpu = "libdevice.exp2(" in lines[end]
    spell = {"exp2": "libdevice.exp2({})" if gpu else "tl.math.exp2({})",
             "rcp": "libdevice.fast_dividef(1.0, {})" if gpu else "1.0 / ({})"}
    return "".join(lines[:doc + 1] + body(spell) + lines[end + 1:])


def with_tform(text: str, coeffs=ERFC_HALF_P) -> str:
    """The module with the gate the backend rendered for bf16 outputs until session 17 (the
    erfc fit in t = 1 / (1 + H |x|), 2 MUFU per output), with this fit in t (lowest degree
    first, log2 units; log2 k added to the constant term as the backend did)."""
    c = [repr(float(x)) for x in coeffs]

    def body(sp):
        steps = ["    a = tl.minimum(tl.abs(x), 1e4)\n",
                 "    t = " + sp["rcp"].format("1.0 + H * a") + "\n",
                 f"    p = {c[-2]} + t * {c[-1]}\n"]
        steps += [f"    p = {x} + t * p\n" for x in reversed(c[1:-2])]
        steps.append(f"    p = ({c[0]} + L) + t * p\n")
        return steps + ["    return K2 * tl.maximum(x, 0.0) - (a * t) * "
                        + sp["exp2"].format("(x * x) * Q + p") + "\n"]
    return _with_body(text, body)


def bias_only(text: str) -> str:
    """Diagnostic, not the op: the gate returns its argument (the kernel adds the bias,
    rounds and stores; everything the GELU computed is dead)."""
    lines, d = _gate_lines(text)
    ret = next(i for i in range(d, len(lines)) if lines[i].startswith("    return "))
    return "".join(lines[:ret] + ["    return x\n"] + lines[ret + 1:])


# One special-function result per output instead of two (session 17): the gate as
# relu(x) - a exp2(p(a)), a = min(|x|, CLAMP) with NaN kept, p a polynomial in a (lowest
# degree first): a minimax fit (linear programme over 4000 Chebyshev nodes) of
# log2(erfc(a / sqrt 2) / 2) over 0 <= a / sqrt 2 <= 9.5, log2 k = -1 of the GELU in the
# constant term. No reciprocal, no t: the fit in a takes degree 10 (relative error of erfc
# 8.9e-6 in exact arithmetic, 2.4e-5 for the GELU in f32) where the fit in t took 5, and
# the quadratic is in p. Past a / sqrt 2 = 9.5, p stays under -129 up to the clamp
# (10.2 sqrt 2), where exp2 flushes to 0 as the t form's does.
# W10 was the backend's gate for half-precision outputs from session 17 until session 18
# (GATE_HALF_W then, in w = a / sqrt 2), here at the GELU's constants in a.
W10 = (-0.9999872274157782, -1.151435586877085, -0.4578030069456719, -0.05484401422828798,
       0.009083066099345356, -0.001134731778627554, 0.0001027636697330694,
       -6.4631446457461175e-06, 2.6536701450878947e-07, -6.3527106977506175e-09,
       6.684592753723746e-11)
W9 = (-1.000034523020268, -1.150922236497978, -0.45891467238377304, -0.053857120698439356,
      0.008626592708837501, -0.0010117494360019888, 8.242152896656352e-05,
      -4.369315662342677e-06, 1.3464681529870706e-07, -1.8226865203098822e-09)
# a diagnostic, not a candidate for the backend: degree 8, relative error 1.4e-4 (1.5e-4 in
# f32), 6 times coarser than W10, for the slope of time against instructions per output
W8 = (-1.0002044250248308, -1.1488080576649755, -0.463199460607538, -0.05051761565236983,
      0.007325018611317134, -0.0007273284047413038, 4.5978222365545315e-05,
      -1.6522332315544997e-06, 2.5558996772344096e-08)
CLAMP = 14.424978256225586
# Session 18: fitted over 0 <= w <= 4.5 only (`exponent_fit(7, 4.5)`), degree 7 is as
# accurate there as W10 is over 0..9.5, and past 4.5 its p falls faster than log2(erfc) to
# the flush: the backend's gate since then (`own`, GATE_HALF_W). W6 is a diagnostic like
# W8, for the slope of time against instructions: `exponent_fit(6, 3.0)`, relative error
# 2.8e-6 up to |x| = 4.24 but p rising again past it (off by up to 2.4e-7 absolute there).
W6 = (-1.000004021168956, -1.151106719126608, -0.45896943875975904,
      -0.05326255610770696, 0.008042158986895854, -0.0007702150888392515,
      3.422421227188871e-05)


def exponent_fit(degree: int, top: float = 9.5, nodes: int = 4000) -> tuple[tuple, float]:
    """W10, W9, W8 (top 9.5), W6 (`exponent_fit(6, 3.0)`) and the backend's GATE_HALF_W
    (`exponent_fit(7, 4.5)`, there in w with log2 2 added back): a minimax fit (linear
    programme over Chebyshev nodes, HiGHS) of the GELU's log2(erfc(a / sqrt 2) / 2) by a
    polynomial in a over 0 <= a / sqrt 2 <= top, lowest degree first, and its largest error
    in log2 units (needs scipy, which the GPU machine's image may lack: the constants above
    are its output)."""
    import numpy as np
    from scipy.optimize import linprog
    from scipy.special import erfcx

    u = (np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes) + 1) / 2  # a / A, A = top sqrt 2
    w = u * top
    y = np.log2(erfcx(w)) - w * w / np.log(2.0) - 1.0
    V = np.vander(u, degree + 1, increasing=True)
    one = np.ones((nodes, 1))
    res = linprog(np.r_[np.zeros(degree + 1), 1.0], A_ub=np.block([[V, -one], [-V, -one]]),
                  b_ub=np.r_[y, -y], bounds=[(None, None)] * (degree + 1) + [(0, None)],
                  method="highs")
    scale = (top * np.sqrt(2.0)) ** np.arange(degree + 1)
    return tuple(float(c) for c in res.x[:-1] / scale), float(res.x[-1])


def with_wpoly(text: str, coeffs) -> str:
    """The module with its Gaussian gate computed with one exp2 and no reciprocal: a
    polynomial in the clamped |x| (for the GELU's constants only: k = 1/2, c = 1/sqrt 2).
    W10 is what the backend renders for bf16 outputs since session 17."""
    c = [repr(float(x)) for x in coeffs]

    def body(sp):
        steps = [f"    a = tl.minimum(tl.abs(x), {CLAMP!r}, propagate_nan=tl.PropagateNan.ALL)\n",
                 f"    p = {c[-2]} + a * {c[-1]}\n"]
        steps += [f"    p = {x} + a * p\n" for x in reversed(c[:-2])]
        return steps + ["    return K2 * tl.maximum(x, 0.0) - a * " + sp["exp2"].format("p")
                        + "\n"]
    return _with_body(text, body)


VARIANTS = {"own": lambda s: s, "t_form": with_tform, "fit3": lambda s: with_tform(s, FIT3),
            "w10": lambda s: with_wpoly(s, W10), "w9": lambda s: with_wpoly(s, W9),
            "w8": lambda s: with_wpoly(s, W8), "w6": lambda s: with_wpoly(s, W6),
            "bias_only": bias_only}
# what each run had (--variants; their `own` then is `t_form` now): session 16's
# h200-gate-fit.json, session 17's h200-gate-fit-onemufu.json and h200-gate-fit-dose.json
RUNS = {"session16": "t_form,fit3,bias_only", "session17": "t_form,w10,w9,bias_only",
        "session17_dose": "t_form,w10,w9,w8,bias_only", "session18": "own,w10,w6,bias_only"}


def runs_for(args, rec) -> dict:
    """Every run of the study, built and checked (a variant that fails is recorded)."""
    import torch
    from h200_erfc_libdevice import archived_best_gemm, kevolve_call, record_failure
    from h200_gemm_counters import renamed

    src, be, case, (A, W, bias) = archived_best_gemm(args.db, rec)
    ref = torch.nn.functional.gelu(torch.addmm(bias.double(), A.double(), W.double()))
    rounded = ref.to(torch.bfloat16)
    ins = {"A": A, "W": W, "bias": bias}
    runs = {"bare_mm": lambda: A @ W,
            "cublaslt_tanh_gelu": lambda: torch._addmm_activation(bias, A, W, use_gelu=True)}
    lt = torch._addmm_activation(bias, A, W, use_gelu=True)
    rec("cublaslt_tanh_gelu_err", (lt.double() - ref).abs().max().item())
    rec("cublaslt_tanh_gelu_not_rounded", (lt != rounded).double().mean().item())
    for name in args.variants:
        edit = VARIANTS[name]
        try:
            s = dataclasses.replace(src, text=renamed(edit(src.text), name))
            runs[name] = kevolve_call(s, be, case, ins, ref, rec, name, other=rounded,
                                      report=True)
        except Exception as e:
            record_failure(rec, name, e)
    return runs


def sass_counts(db: str, variants) -> dict:
    """Per variant, the SASS ptxas makes for sm_90 (compiled here, no GPU needed: Triton's
    own ptxas and cuobjdump) counted by opcode, with registers and the ptxas version."""
    import collections
    import subprocess
    import tempfile

    from h200_gemm_counters import json_trace
    from h200_gluon_epilogue import disassemble

    import kevolve
    from kevolve.backends.triton.aot import compile_aot, ptxas_path
    from kevolve.ops import get

    d = get("gemm_bias_gelu")
    src = kevolve.lower(d.op, json_trace(db), "triton", d.dims("gpu"))
    out = {}
    for name in variants:
        text = VARIANTS[name](src.text)
        info = compile_aot(dataclasses.replace(src, text=text), "cuda:90", keep_asm=True)["k_y"]
        with tempfile.TemporaryDirectory() as tmp:  # keep_asm keeps texts: assemble the PTX
            ptx, cubin = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
            with open(ptx, "w") as f:
                f.write(info["text"]["ptx"])
            subprocess.run([ptxas_path(), "-arch=sm_90a", ptx, "-o", cubin], check=True)
            with open(cubin, "rb") as f:
                sass = disassemble(f.read())
        ops = collections.Counter(m.group(1) for m in re.finditer(
            r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P[0-9T]+ )?([A-Z0-9_]+)", sass))
        out[name] = {"registers": info["registers"], "ptxas": info.get("ptxas_version"),
                     "total": sum(ops.values()), **dict(ops.most_common(12))}
    return out


def main() -> None:
    from h200_gelu_power import bench_rounds_and_power
    from h200_gemm_counters import profile_calls, study_args
    from h200_triton_structures import recorder

    ap = study_args()
    ap.add_argument("--sass", action="store_true",
                    help="print each variant's sm_90 SASS counted by opcode (no GPU needed)")
    ap.add_argument("--variants", type=lambda v: RUNS.get(v, v).split(","),
                    default="own,t_form,bias_only",
                    help=f"comma-separated, of {', '.join(VARIANTS)}, or a past run's: "
                         f"{', '.join(RUNS)}")
    ap.add_argument("--power-rounds", type=int, default=2,
                    help="rounds of the runs back to back under nvidia-smi (order reversed "
                         "every other round)")
    args = ap.parse_args()
    if args.sass:
        for name, counts in sass_counts(args.db, args.variants).items():
            print(name, counts)
        return
    if args.profile:
        return profile_calls(runs_for(args, lambda k, v: None))
    rec = recorder(os.path.join(args.out, "gate-fit.json"))
    runs = runs_for(args, rec)
    bench_rounds_and_power(runs, rec, args.rounds, args.seconds, args.power_rounds)


if __name__ == "__main__":
    main()
