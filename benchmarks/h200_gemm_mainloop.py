"""How close Triton's matmul alone gets to cuBLAS on the H200 (8192x4096x4096 bf16, f32
accumulate, bf16 result, no bias and no GELU): the ceiling on gemm_bias_gelu's
t_bare / t_kevolve through the Triton backend, whatever its epilogue. Hand-written kernels
of every structure tried so far (pointer loads; tensor-descriptor loads; persistent
descriptor kernels, flattened or not, warp-specialized or not) at the tile shapes the
searches kept, beside cuBLAS (`A @ W`) and torch.compile of the whole op, in interleaved
rounds. Not kevolve output.

    cd benchmarks && PYTHONPATH=..:. python3 h200_gemm_mainloop.py --out $OUT   # mainloop.json
    ... --epilogue   # the whole op (bias + erf GELU): which structure keeps the persistent
                     # mainloop's gain (epilogue.json)
"""

from __future__ import annotations

import argparse
import os

import torch
import triton
import triton.language as tl
from h200_erf_store_stream import add_checked, interleaved
from h200_triton_structures import desc_dot, gemm_descs, ptr_dot, recorder, tile_of


@triton.jit
def k_ptr(a, w, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
          GM: tl.constexpr):
    pm, pn = tile_of(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GM)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = ptr_dot(a, w, rm, rn, K, N, BM, BN, BK)
    tl.store(y + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))


@triton.jit
def k_desc(a, w, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
           GM: tl.constexpr):
    ad, wd, yd = gemm_descs(a, w, y, M, N, K, BM, BN, BK)
    pm, pn = tile_of(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GM)
    acc = desc_dot(ad, wd, pm, pn, K, BM, BN, BK)
    yd.store([pm * BM, pn * BN], acc.to(tl.bfloat16))


@triton.jit
def k_persist(a, w, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
              GM: tl.constexpr, NSM: tl.constexpr, FLAT: tl.constexpr, WS: tl.constexpr):
    ad, wd, yd = gemm_descs(a, w, y, M, N, K, BM, BN, BK)
    npm, npn = tl.cdiv(M, BM), tl.cdiv(N, BN)
    for t in tl.range(tl.program_id(0), npm * npn, NSM, flatten=FLAT, warp_specialize=WS):
        pm, pn = tile_of(t, npm, npn, GM)
        acc = desc_dot(ad, wd, pm, pn, K, BM, BN, BK)
        yd.store([pm * BM, pn * BN], acc.to(tl.bfloat16))


@triton.jit
def _erfc(w):
    """The Triton backend's branch-free erfc (templates/triton/module.j2)."""
    z = tl.abs(w)
    t = tl.fdiv(1.0, 1.0 + 0.5 * z)
    p = -0.82215223 + t * 0.17087277
    p = 1.48851587 + t * p
    p = -1.13520398 + t * p
    p = 0.27886807 + t * p
    p = -0.18628806 + t * p
    p = 0.09678418 + t * p
    p = 0.37409196 + t * p
    p = 1.00002368 + t * p
    p = -1.26551223 + t * p
    r = t * tl.exp(-z * z + p)
    return tl.where(w >= 0, r, 2.0 - r)


@triton.jit
def _tile(a, w, b, y, ad, wd, yd, pm, pn, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
          BK: tl.constexpr, DL: tl.constexpr, DS: tl.constexpr):
    """One output tile: K loop (pointer or descriptor loads), bias + erf GELU, store."""
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    if DL:
        acc = desc_dot(ad, wd, pm, pn, K, BM, BN, BK)
    else:
        acc = ptr_dot(a, w, rm, rn, K, N, BM, BN, BK)
    v = acc + tl.load(b + rn).to(tl.float32)[None, :]
    out = (0.5 * v * _erfc(-(v * 0.7071067811865476))).to(tl.bfloat16)
    if DS:
        yd.store([pm * BM, pn * BN], out)
    else:
        tl.store(y + rm[:, None] * N + rn[None, :], out)


@triton.jit
def k_epi(a, w, b, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
          GM: tl.constexpr, PERSIST: tl.constexpr, DL: tl.constexpr, DS: tl.constexpr,
          NSM: tl.constexpr, FLAT: tl.constexpr, WS: tl.constexpr):
    """gemm_bias_gelu whole: one tile per program or persistent (NSM programs looping over
    tiles), pointer or descriptor loads (DL) and store (DS)."""
    ad, wd, yd = gemm_descs(a, w, y, M, N, K, BM, BN, BK)
    npm, npn = tl.cdiv(M, BM), tl.cdiv(N, BN)
    if PERSIST:
        for t in tl.range(tl.program_id(0), npm * npn, NSM, flatten=FLAT, warp_specialize=WS):
            pm, pn = tile_of(t, npm, npn, GM)
            _tile(a, w, b, y, ad, wd, yd, pm, pn, M, N, K, BM, BN, BK, DL, DS)
    else:
        pm, pn = tile_of(tl.program_id(0), npm, npn, GM)
        _tile(a, w, b, y, ad, wd, yd, pm, pn, M, N, K, BM, BN, BK, DL, DS)


@triton.jit
def k_persist_ptr(a, w, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  GM: tl.constexpr, NSM: tl.constexpr, FLAT: tl.constexpr, WS: tl.constexpr):
    """The matmul alone, persistent, pointer loads and store."""
    npm, npn = tl.cdiv(M, BM), tl.cdiv(N, BN)
    for t in tl.range(tl.program_id(0), npm * npn, NSM, flatten=FLAT, warp_specialize=WS):
        pm, pn = tile_of(t, npm, npn, GM)
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        acc = ptr_dot(a, w, rm, rn, K, N, BM, BN, BK)
        tl.store(y + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))


def epilogue_study(rec, rounds: int) -> None:
    """The whole op: which of persistence, descriptor loads and descriptor stores carry
    the persistent mainloop's gain through the GELU epilogue."""
    M, K, N = 8192, 4096, 4096
    A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    W = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / 64
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16) * 0.5
    ref = torch.nn.functional.gelu(torch.addmm(bias.double(), A.double(), W.double()))
    ref_mm = A.double() @ W.double()
    f = torch.compile(lambda a, w, b: torch.nn.functional.gelu(torch.addmm(b, a, w)))
    f(A, W, bias)
    nsm = torch.cuda.get_device_properties(0).multi_processor_count
    runs = {"bare_mm": lambda: A @ W, "compile": lambda: f(A, W, bias)}
    tiles = [(128, 256, 64, 8, 3), (128, 128, 64, 4, 4)]
    for BM, BN, BK, nw, ns in tiles:
        tag = f"{BM}x{BN}x{BK}_w{nw}_s{ns}"
        kw = dict(BM=BM, BN=BN, BK=BK, GM=8, num_warps=nw, num_stages=ns)
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        cases = [(f"tile_dl{dl}_ds{ds}", grid, dict(PERSIST=False, DL=dl, DS=ds, NSM=nsm,
                                                     FLAT=False, WS=False))
                 for dl in (False, True) for ds in (False, True)]
        cases += [(f"persist_dl{dl}_ds{ds}_f{fl}_ws{ws}", (nsm,),
                   dict(PERSIST=True, DL=dl, DS=ds, NSM=nsm, FLAT=fl, WS=ws))
                  for dl in (False, True) for ds in (False, True) for fl in (False, True)
                  for ws in (False, True)]
        for name, g, extra in cases:
            name = f"{name}_{tag}".replace("True", "1").replace("False", "0")
            y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            def call(g=g, y=y, extra=extra, kw=kw):
                k_epi[g](A, W, bias, y, M, N, K, **extra, **kw)
            add_checked(runs, rec, name, call, y, ref)
        for fl in (False, True):
            name = f"mainloop_persist_ptr_f{int(fl)}_{tag}"
            y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            def call(y=y, fl=fl, kw=kw):
                k_persist_ptr[(nsm,)](A, W, y, M, N, K, NSM=nsm, FLAT=fl, WS=False, **kw)
            add_checked(runs, rec, name, call, y, ref_mm)
    times = interleaved(runs, rec, rounds, "epi_")
    bare = times["bare_mm"]["ms"]
    rec("epi_bare_over", dict(sorted(((k, bare / v["ms"]) for k, v in times.items()),
                                     key=lambda kv: -kv[1])))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--epilogue", action="store_true",
                    help="the whole op instead: persistence x descriptor loads/stores")
    args = ap.parse_args()
    triton.set_allocator(lambda size, alignment, stream:
                         torch.empty(size, device="cuda", dtype=torch.int8))
    if args.epilogue:
        epilogue_study(recorder(os.path.join(args.out, "epilogue.json")), args.rounds)
        return
    rec = recorder(os.path.join(args.out, "mainloop.json"))
    M, K, N = 8192, 4096, 4096
    A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    W = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / 64
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16) * 0.5
    ref = A.double() @ W.double()
    f = torch.compile(lambda a, w, b: torch.nn.functional.gelu(torch.addmm(b, a, w)))
    f(A, W, bias)
    nsm = torch.cuda.get_device_properties(0).multi_processor_count
    runs = {"bare_mm": lambda: A @ W, "compile": lambda: f(A, W, bias)}
    tiles = [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 3),
             (128, 128, 64, 4, 4)]
    for BM, BN, BK, nw, ns in tiles:
        tag = f"{BM}x{BN}x{BK}_w{nw}_s{ns}"
        kw = dict(BM=BM, BN=BN, BK=BK, GM=8, num_warps=nw, num_stages=ns)
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        kinds = [("ptr", k_ptr, grid, {}), ("desc", k_desc, grid, {})]
        kinds += [(f"persist_f{int(fl)}_ws{int(ws)}", k_persist, (nsm,),
                   dict(NSM=nsm, FLAT=fl, WS=ws)) for fl in (False, True) for ws in (False, True)]
        for kind, kern, g, extra in kinds:
            name = f"{kind}_{tag}"
            y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            def call(kern=kern, g=g, y=y, extra=extra, kw=kw):
                kern[g](A, W, y, M, N, K, **extra, **kw)
            add_checked(runs, rec, name, call, y, ref)
    times = interleaved(runs, rec, args.rounds, "mainloop_")
    bare = times["bare_mm"]["ms"]
    rec("bare_over", dict(sorted(((k, bare / v["ms"]) for k, v in times.items()),
                                 key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()
