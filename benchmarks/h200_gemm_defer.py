"""Does gemm_bias_gelu's epilogue hide behind the next tile's matmul? (session 15)

kevolve's best Triton kernels for gemm_bias_gelu run the bias + GELU epilogue of a tile
with the tensor cores idle: the 8 warps that issue the tile's wgmma also compute its
32768 GELUs, after the last wgmma has finished (pipelined across tiles or not, the
accumulator must be complete first). cuBLAS hides its epilogue behind another warpgroup's
mainloop; Triton 3.6 cannot be asked for that on this kernel (h200_gemm_ws.py). This study
tries the other way to overlap within one warpgroup: a persistent program keeps the
previous tile's pre-activation (accumulator + bias, rounded to bf16: the rounding
torch.compile's addmm also makes) in registers as 8 column chunks of 128x32, and computes
and stores chunk c right after it issues the c-th asynchronous wgmma of the next tile, so
that each chunk's ALU work runs while the tensor cores work. The last tile's epilogue
runs after the loop. A hand-written kernel (kevolve renders none like it), in the module
the backend renders for the search from scratch's best (candidate 160 of
h200-gemm-fresh-archive.db) with one persistent program per SM and `pipeline:
across_tiles`, beside that rendering and the candidate as the ranking ran it, cuBLAS's
bare matmul and torch.compile: checked against float64 first, then interleaved do_bench
rounds, then 2 s back to back each under nvidia-smi (energy per call).

Session 15 (h200-gemm-defer.json): the deferred kernel took 255 registers (64 bytes of
local memory) and was wrong on the GPU at both stage counts (largest error 6.06 against
float64; in Triton's interpreter, which ignores `flatten`, 0.062, the double rounding) and
slow: 0.849 / 0.861 of cuBLAS's bare matmul sustained (334 / 330 mJ per call) against
0.936 (302 mJ) for the across-tiles rendering it replaces and 0.926 for candidate 160 as
ranked (do_bench, 7 rounds: 0.841, 0.877, 0.954, 0.918). Not pursued. With `--variants
persistent` (h200-gemm-persistent.json, 9 rounds), candidate 160 with 1, 2 and 4 persistent
programs per multiprocessor (the H200 holds one of them), within tiles / across tiles:
do_bench 0.957 / 0.976, 0.977 / 0.969, 0.944 / 0.943 of bare; sustained 0.933 / 0.939,
0.931 / 0.941, 0.929 / 0.935. That is why the heuristic proposer caps the count at what a
multiprocessor holds (resources.resident_programs).

    PYTHONPATH=.:benchmarks python3 benchmarks/h200_gemm_defer.py --out $OUT
    PYTHONPATH=.:benchmarks python3 benchmarks/h200_gemm_defer.py --variants persistent --rounds 9
"""

from __future__ import annotations

import dataclasses
import os
import re

from h200_gemm_kdepth import changed, trace_of

FRESH = "benchmarks/results/h200-gemm-fresh-archive.db"
BASE = 160  # the committed ranking's gemm_bias_gelu (session 13)
ACROSS = {"launch": {"persistent": 1, "pipeline": "across_tiles"}}

_DEFERRED = '''
@triton.jit
def _kv_defer_epi(t_y, xb, io, jo, C: tl.constexpr):
    """GELU of one 128x32 chunk of the pre-activation, stored in bulk."""
    v = _kv_gauss_gate(xb.to(tl.float32), 1.0, 0.35355339059327373, -0.7213475204444816, -1.0)
    t_y.store([io * 128, jo * 256 + C * 32], v.to(tl.bfloat16))


@triton.jit
def _kv_defer_chunks(x):
    """[128, 256] as 8 [128, 32] column chunks, in order (register moves only)."""
    x = tl.permute(tl.reshape(x, [128, 2, 2, 2, 32]), (0, 4, 3, 2, 1))
    lo, hi = tl.split(x)
    a0, a1 = tl.split(lo)
    b0, b1 = tl.split(hi)
    c0, c1 = tl.split(a0)
    c2, c3 = tl.split(a1)
    c4, c5 = tl.split(b0)
    c6, c7 = tl.split(b1)
    return c0, c1, c2, c3, c4, c5, c6, c7


@triton.jit
def k_y(p_A, p_W, p_bias, p_y, d_K, d_M, d_N, t_A_128x64, t_W_64x256, t_y_128x32):
    n_a = d_M // 128
    n_b = d_N // 256
    z = tl.zeros([128, 32], tl.bfloat16)
{init}
    pio = 0
    pjo = 0
    have = 0
    r_ji = tl.arange(0, 256)
    for tile in tl.range(tl.program_id(0), n_a * n_b, tl.num_programs(0), flatten=True):
        per_group = 16 * n_b
        first = (tile // per_group) * 16
        gsize = tl.minimum(n_a - first, 16)
        g_io = first + (tile % per_group) % gsize
        g_jo = (tile % per_group) // gsize
        acc = tl.zeros([128, 256], tl.float32)
        for kk in range(0, d_K // 64):
            a = t_A_128x64.load([g_io * 128, kk * 64])
            b = t_W_64x256.load([kk * 64, g_jo * 256])
            acc = tl.dot(a, b, acc)
            if have != 0:
{in_loop}
        bias = tl.load(p_bias + g_jo * 256 + r_ji).to(tl.float32)
        q0, q1, q2, q3, q4, q5, q6, q7 = _kv_defer_chunks((acc + bias[None, :]).to(tl.bfloat16))
        pio = g_io
        pjo = g_jo
        have = 1
    if have != 0:
{after}

'''
CHUNKS = 8  # the column chunks _kv_defer_chunks makes (3 splits in two)


def _epilogue_calls(indent: str, guarded: bool) -> str:
    """One `_kv_defer_epi` call per chunk, each under `if kk == c:` when `guarded`."""
    out = []
    for c in range(CHUNKS):
        call = f"_kv_defer_epi(t_y_128x32, q{c}, pio, pjo, {c})"
        out += [f"{indent}if kk == {c}:", f"{indent}    {call}"] if guarded else [indent + call]
    return "\n".join(out)


DEFERRED = _DEFERRED.format(init="\n".join(f"    q{c} = z" for c in range(CHUNKS)),
                            in_loop=_epilogue_calls(" " * 16, True),
                            after=_epilogue_calls(" " * 8, False))


def deferred(text: str, stages: int) -> str:
    """The across-tiles rendering of candidate 160 with its kernel replaced by the
    deferred-epilogue kernel above (output descriptor blocks of 128x32)."""
    s, e = text.index("@triton.jit\ndef k_y("), text.index("\ndef launch(")
    text = text[:s] + DEFERRED.lstrip("\n") + text[e:]
    old = 'TensorDescriptor.from_tensor(bufs["y"], [128, 128])'
    assert text.count(old) == 1 and text.count("num_stages=4") == 1
    return text.replace(old, old.replace("128]", "32]")).replace(
        "num_stages=4", f"num_stages={stages}")


def texts_for(which: str, base: dict, plan, be) -> dict:
    """The kevolve variants of a run, each with its trace in `meta`: `defer` (candidate
    160 as ranked, across tiles, and the deferred kernel at 4 and 3 stages, whose trace is
    the across-tiles one it replaces) or `persistent` (160 with 1, 2 and 4 persistent
    programs per multiprocessor, each within tiles and across tiles)."""
    import kevolve

    def lowered(change):
        t = changed(base, change)
        return dataclasses.replace(kevolve.lower(plan.op, t, be, plan.dims_dict),
                                   meta={"plan": plan, "trace": t})

    if which == "persistent":
        return {f"p{n}{'_across' if across else ''}": lowered(
            {"launch": {"persistent": n, "pipeline": "across_tiles" if across else None}})
            for n in (1, 2, 4) for across in (False, True)}
    out = {"k160": lowered({}), "k160_across": lowered(ACROSS)}
    for st in (4, 3):
        t = changed(base, {"launch": {**ACROSS["launch"], "num_stages": st}})
        out[f"defer_s{st}"] = dataclasses.replace(
            out["k160_across"], text=deferred(out["k160_across"].text, st),
            meta={"plan": plan, "trace": t})
    return out


def main() -> None:
    from h200_erfc_libdevice import kevolve_call
    from h200_gelu_power import time_and_power
    from h200_gemm_counters import renamed, study_args
    from h200_gemm_ws import prepared
    from h200_triton_structures import recorder

    ap = study_args()
    ap.set_defaults(db=FRESH)
    ap.add_argument("--variants", choices=("defer", "persistent"), default="defer")
    args = ap.parse_args()
    rec = recorder(os.path.join(args.out, f"gemm-{args.variants}.json"))
    src, be, case, ins, ref, want, runs = prepared(args.db, rec)
    runs = {k: runs[k] for k in ("bare_mm", "compile")}
    texts = texts_for(args.variants, trace_of(args.db, BASE), src.meta["plan"], be)
    rec("launch", {k: next(m for m in s.meta["trace"]["moves"] if m["m"] == "launch")
                   for k, s in texts.items()})
    for name, s in texts.items():
        try:
            runs[name] = kevolve_call(dataclasses.replace(s, text=renamed(s.text, name)), be,
                                      case, ins, ref, rec, name, other=want, report=True)
        except Exception as e:  # a variant that does not build is recorded, the rest go on
            msg = re.sub(r"\s+", " ", str(e))[:600]
            rec(name + "_error", f"{type(e).__name__}: {msg}")
    time_and_power(runs, rec, args.rounds, args.seconds)


if __name__ == "__main__":
    main()
