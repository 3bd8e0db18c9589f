"""Does a deeper K tile take gemm_bias_gelu's mainloop overhead off, and what do Triton's
loop options and a descriptor store add? (session 12)

The SASS of kevolve's best kernels (128x256x64 tiles, 8 warps, bulk copies) spends 66
instructions per warp on each 64-deep K step, 4 of them wgmma: the mbarrier wait and
arrive, three CTA barriers around the copy engine's issue, the descriptors' arithmetic.
Over the op's 64 K steps per tile that is about 35M of the kernel's 62M warp instructions
(Nsight Compute), and at this GPU's 700 W cap time per call follows energy per call
(h200_gemm_counters.py). A 128-deep K tile issues 8 wgmma per step with about 85
instructions (sm_90a SASS from ptxas 13.0); its two stages of 96 KB fit the shared memory
where three do not (the searches tried 128-deep tiles at 128x256 only at 3 and 4 stages).

Every variant is a schedule (a trace: candidate 387, the archive's best then, changed) the
backend renders as is, apart from hand edits of the rendering that price what was not
built yet: the output tile stored through tensor descriptors in two halves, the persistent
tile loop with `flatten=True` (`--loops`), and a bias-only diagnostic. Each is checked
against float64 first, then timed beside cuBLAS's bare matmul, cuBLASLt's fused bias +
tanh GELU and torch.compile in interleaved do_bench rounds, then back to back under
nvidia-smi (energy per call). `--profile` runs one call of each between
cudaProfilerStart/Stop for Nsight Compute (h200_gemm_kdepth.sh).

Results (h200-gemm-kdepth*.json, h200-gemm-kdepth-ncu.csv): 128-deep K tiles cut the
instructions to 48-49M but ran at 0.64-0.77 of bare, sustained: two stages leave the copy
engine's latency exposed. With `--loops`, on the two best 64-deep bulk schedules: 0.914 /
0.911 of bare sustained as rendered, 0.928 / 0.926 flattened, 0.942 / 0.938 flattened with
the descriptor store (300.6 / 301.5 mJ per call against 282.6). Both edits became moves:
`launch` `pipeline: across_tiles` and `cache y ... copy: bulk, parts: 2`.

    PYTHONPATH=.:benchmarks python3 benchmarks/h200_gemm_kdepth.py --out $OUT
    PYTHONPATH=.:benchmarks python3 benchmarks/h200_gemm_kdepth.py --loops --rounds 9 \
        --out $OUT
    bash benchmarks/h200_gemm_kdepth.sh          # the first, then Nsight Compute's counters
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re

# (name, changes to the archive's best trace): decisions, launch hints, bulk copies
VARIANTS = (
    ("pick", {}),
    ("bulk_k64_s4_g4", {"bulk": True, "launch": {"num_stages": 4, "group_m": 4}}),
    ("bulk_k64_s3_g8", {"bulk": True, "launch": {"num_stages": 3, "group_m": 8}}),
    ("bulk_k128_s2_g8", {"bulk": True, "BK": 128, "launch": {"num_stages": 2, "group_m": 8}}),
    ("bulk_k128_s2_g4", {"bulk": True, "BK": 128, "launch": {"num_stages": 2, "group_m": 4}}),
    ("bulk_k128_s2_g16", {"bulk": True, "BK": 128,
                          "launch": {"num_stages": 2, "group_m": 16}}),
    ("ptr_k128_s2_g8", {"BK": 128, "launch": {"num_stages": 2, "group_m": 8}}),
    ("bulk_256x128_k128_s2_g8", {"bulk": True, "BK": 128, "BM": 256, "BN": 128,
                                 "launch": {"num_stages": 2, "group_m": 8}}),
    ("bulk_k128_s2_g8_tiles", {"bulk": True, "BK": 128,
                               "launch": {"num_stages": 2, "group_m": 8, "persistent": None}}),
)
# hand edits of a variant's rendering (diagnostics, not kevolve output)
EDITS = (("bulk_k128_s2_g8_tmastore", "bulk_k128_s2_g8", "tma_store"),
         ("bulk_k64_s4_g4_tmastore", "bulk_k64_s4_g4", "tma_store"),
         ("diag_bulk_k128_s2_g8_bias_only", "bulk_k128_s2_g8", "bias_only"))
# the second run (--loops): Triton's loop options on the persistent tile loop
LOOP_VARIANTS = ("pick", "bulk_k64_s4_g4", "bulk_k64_s3_g8")
LOOP_EDITS = tuple((f"{of}_{kind.replace('+tma_store', '_tmastore')}", of, kind)
                   for of in ("bulk_k64_s4_g4", "bulk_k64_s3_g8")
                   for kind in ("flatten", "flatten+tma_store")) + (
    ("bulk_k64_s3_g8_tmastore", "bulk_k64_s3_g8", "tma_store"),)


# the archive's best when the study ran (session 12), which every variant changes; since
# then the best is one of the study's own results, so the study names its base
BASE = 387


def trace_of(db: str, cid: int) -> dict:
    """Candidate `cid`'s trace in the archive `db`."""
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (tj,), = con.execute("select trace_json from candidates where id = ?", (cid,))
    finally:
        con.close()
    return json.loads(tj)


def base_trace(db: str) -> dict:
    return trace_of(db, BASE)


def changed(base: dict, change: dict) -> dict:
    """A copy of `base` with a variant's tile sizes (BM, BN, BK) and launch hints (None
    drops one)."""
    t = copy.deepcopy(base)
    for key in ("BM", "BN", "BK"):
        if key in change:
            t["decisions"]["$" + key] = change[key]
    launch = next(m for m in t["moves"] if m["m"] == "launch")
    for k, v in change.get("launch", {}).items():
        if v is None:
            launch.pop(k, None)
        else:
            launch[k] = v
    return t


def variant_trace(base: dict, change: dict) -> dict:
    """The archive's best trace with a variant's changes."""
    t = changed(base, change)
    t["moves"] = [m for m in t["moves"] if m["m"] != "cache"]
    if change.get("bulk"):
        t["moves"] += [{"m": "cache", "stage": "acc", "buffer": b, "scope": "shared",
                        "copy": "bulk"} for b in ("A", "W")]
    return t


def call_args(text: str, name: str) -> tuple[int, int, list[str]]:
    """(start, end, top-level arguments) of the first call `name(...)` in kernel k_y."""
    start = text.index(name + "(", text.index("def k_y("))
    depth, args, i0 = 0, [], start + len(name) + 1
    for i in range(i0 - 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 1 and text[i] == ",":
            args.append(text[i0:i].strip())
            i0 = i + 1
        if depth == 0:
            return start, i + 1, args + [text[i0:i].strip()]
    raise ValueError(f"unbalanced call to {name}")


def edited(text: str, kind: str, bm: int, bn: int) -> str:
    """`tma_store`: the output tile stored through tensor descriptors in two halves of
    bm x bn/2 (a whole 128x256 bf16 tile's staging buffer does not fit beside two
    128-deep stages); `bias_only`: the GELU left out (acc + bias stored), not the op."""
    if kind == "flatten":  # (warp_specialize=True compiles to the same kernel on sm_90)
        s, e, args = call_args(text, "tl.range")
        assert args[0] == "tl.program_id(0)", "the persistent tile loop was not found"
        return text[:s] + "tl.range(" + ", ".join(args + ["flatten=True"]) + ")" + text[e:]
    if kind.endswith("+tma_store"):
        return edited(edited(text, kind.split("+")[0], bm, bn), "tma_store", bm, bn)
    if kind == "bias_only":
        s, e, args = call_args(text, "_kv_gauss_gate")
        return text[:s] + args[0] + text[e:]
    s, e, args = call_args(text, "tl.store")
    assert args[0].startswith("p_y + "), "the output store was not found"
    h = bn // 2
    desc = f"t_y_{bm}x{h}"
    ind = re.search(r"\n( *)tl\.store\(p_y", text).group(1)
    body = (f"v_y = {args[1]}\n"
            f"{ind}v_y0, v_y1 = tl.split(tl.permute(tl.reshape(v_y, [{bm}, 2, {h}]), (0, 2, 1)))\n"
            f"{ind}{desc}.store([g_io * {bm}, g_jo * {bn}], v_y0)\n"
            f"{ind}{desc}.store([g_io * {bm}, g_jo * {bn} + {h}], v_y1)")
    text = text[:s] + body + text[e:]
    text = re.sub(r"(def k_y\([^)]*)\)", rf"\1, {desc})", text, count=1)
    return re.sub(r"(k_y\[grid\]\(.*?)(, num_warps=)",
                  rf'\1, TensorDescriptor.from_tensor(bufs["y"], [{bm}, {h}])\2', text,
                  count=1)


def sources(db: str, rec, loops: bool = False):
    """(name, KernelSource) of every variant (`loops`: the second run's), lowered at the
    benchmark shape, plus the backend, the case and its bf16 CUDA inputs."""
    from h200_erfc_libdevice import archived_best_gemm
    from h200_gemm_counters import renamed

    import kevolve

    src, be, case, ts = archived_best_gemm(db, rec)
    base = base_trace(db)
    rec("base", {"candidate": BASE, "trace": base})
    plan = src.meta["plan"]
    out, traces = {}, {}
    variants, edits = VARIANTS, EDITS
    if loops:
        variants = tuple(v for v in VARIANTS if v[0] in LOOP_VARIANTS)
        edits = LOOP_EDITS
    for name, change in variants:
        t = variant_trace(base, change)
        traces[name] = t
        try:
            out[name] = kevolve.lower(plan.op, t, be, plan.dims_dict)
        except Exception as e:
            rec(name + "_error", f"{type(e).__name__}: {str(e)[:400]}")
    rec("traces", traces)
    for name, of, kind in edits:
        if of in out:
            d = traces[of]["decisions"]
            out[name] = dataclasses.replace(
                out[of], text=edited(out[of].text, kind, d["$BM"], d["$BN"]))
    for name, s in out.items():
        out[name] = dataclasses.replace(s, text=renamed(s.text, name))
    return out, be, case, ts


def runs_for(args, rec):
    """Every contender as a checked call, in a fixed order: the baselines first."""
    from h200_erfc_libdevice import kevolve_call
    from h200_gemm_counters import baselines

    srcs, be, case, (A, W, bias) = sources(args.db, rec, args.loops)
    ins = {"A": A, "W": W, "bias": bias}
    ref, want, runs = baselines(A, W, bias)
    for name, s in srcs.items():
        try:
            runs[name] = kevolve_call(s, be, case, ins, ref, rec, name, other=want)
        except Exception as e:
            rec(name + "_error", f"{type(e).__name__}: {str(e)[:400]}")
    return runs


def profile(args) -> None:
    """One call of each contender between cudaProfilerStart and Stop, after a warm-up."""
    from h200_gemm_counters import profile_calls

    profile_calls(runs_for(args, lambda k, v: None))


def main() -> None:
    from h200_gemm_counters import study_args

    ap = study_args()
    ap.add_argument("--loops", action="store_true",
                    help="the second run: the tile loop flattened, and the descriptor store")
    args = ap.parse_args()
    if args.profile:
        return profile(args)
    from h200_gelu_power import time_and_power
    from h200_triton_structures import recorder

    rec = recorder(os.path.join(args.out, "gemm-kdepth-loops.json" if args.loops
                                else "gemm-kdepth.json"))
    runs = runs_for(args, rec)
    time_and_power(runs, rec, args.rounds, args.seconds)


if __name__ == "__main__":
    main()
