"""Where gemm_bias_gelu's time goes on the H200 (8192x4096x4096 bf16): hand-written Triton
kernels of the best structure found so far (pointer loads, 128x256x64, 8 warps, 3 stages,
grouped order) with the epilogue varied — none (store the accumulator), bias only, the erf
GELU on the whole tile, the GELU over 2 or 4 column sub-tiles of the accumulator — and the
K loop varied (dims as constexpr, warp-specialized). Beside cuBLAS's bare matmul and
torch.compile, all in one run. Not kevolve output: it tells which schedule capability
could close the gap to cuBLAS before one is built.

    PYTHONPATH=. python3 benchmarks/h200_gemm_epilogue.py --out $OUT   # $OUT/gemm_epilogue.json

Its committed output, benchmarks/results/h200-gemm-epilogue.json, came from this file when
it held its own copies of the GELU, the grouped order and gemm_kernel_cx's K loop (now
imported from h200_triton_structures.py, the same code; the sm_90 PTX of gemm_kernel_cx
differs only in the order of three independent prologue instructions).
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import triton
import triton.language as tl
from h200_triton_structures import gelu as _gelu  # the same GELU and grouped order
from h200_triton_structures import ptr_dot
from h200_triton_structures import tile_of as _tile
from triton.testing import do_bench


@triton.jit
def gemm_kernel(a, w, b, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                GM: tl.constexpr, EPI: tl.constexpr, SUB: tl.constexpr, WS: tl.constexpr):
    """EPI: 0 none, 1 bias, 2 bias + GELU. SUB: column sub-tiles of the epilogue."""
    pm, pn = _tile(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GM)
    rm = pm * BM + tl.arange(0, BM)
    rk = tl.arange(0, BK)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=WS):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        z = tl.load(w + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(x, z, acc)
    if SUB == 1:
        if EPI >= 1:
            acc += tl.load(b + rn).to(tl.float32)[None, :]
        if EPI == 2:
            acc = _gelu(acc)
        tl.store(y + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))
    elif SUB == 2:
        h0, h1 = acc.reshape(BM, 2, BN // 2).permute(0, 2, 1).split()
        _gelu_store(h0, b, y, rm, pn * BN, N, BN // 2)
        _gelu_store(h1, b, y, rm, pn * BN + BN // 2, N, BN // 2)
    else:
        h0, h1 = acc.reshape(BM, 2, BN // 2).permute(0, 2, 1).split()
        q0, q1 = h0.reshape(BM, 2, BN // 4).permute(0, 2, 1).split()
        q2, q3 = h1.reshape(BM, 2, BN // 4).permute(0, 2, 1).split()
        _gelu_store(q0, b, y, rm, pn * BN, N, BN // 4)
        _gelu_store(q1, b, y, rm, pn * BN + BN // 4, N, BN // 4)
        _gelu_store(q2, b, y, rm, pn * BN + BN // 2, N, BN // 4)
        _gelu_store(q3, b, y, rm, pn * BN + 3 * (BN // 4), N, BN // 4)


@triton.jit
def _gelu_store(h, b, y, rm, n0, N, W: tl.constexpr):
    """Bias + GELU and store of one column sub-tile [BM, W] starting at column n0."""
    rr = n0 + tl.arange(0, W)
    h = _gelu(h + tl.load(b + rr).to(tl.float32)[None, :])
    tl.store(y + rm[:, None] * N + rr[None, :], h.to(tl.bfloat16))


@triton.jit
def gemm_kernel_cx(a, w, b, y, M, N: tl.constexpr, K: tl.constexpr, BM: tl.constexpr,
                   BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr):
    """The full epilogue on the whole tile, with N and K compiled in."""
    pm, pn = _tile(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GM)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = ptr_dot(a, w, rm, rn, K, N, BM, BN, BK)
    acc += tl.load(b + rn).to(tl.float32)[None, :]
    tl.store(y + rm[:, None] * N + rn[None, :], _gelu(acc).to(tl.bfloat16))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    path = os.path.join(ap.parse_args().out, "gemm_epilogue.json")
    res: dict = {}

    def rec(k, v):
        res[k] = v
        print(k, v, flush=True)
        with open(path, "w") as f:
            json.dump(res, f, indent=1)

    M, K, N = 8192, 4096, 4096
    A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    W = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / 64
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16) * 0.5
    mm = (A.float() @ W.float())
    refs = {0: mm, 1: mm + bias.float(), 2: torch.nn.functional.gelu(mm + bias.float())}
    med = lambda fn: do_bench(fn, warmup=50, rep=300, return_mode="median")  # noqa: E731
    f = torch.compile(lambda a, w, b: torch.nn.functional.gelu(torch.addmm(b, a, w)))
    f(A, W, bias)
    base = {"bare_mm": lambda: A @ W, "compile": lambda: f(A, W, bias)}
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 256),)
    cfg = dict(BM=128, BN=256, BK=64, GM=8, num_warps=8, num_stages=3)
    variants = [("epi_none", 0, 1, False), ("epi_bias", 1, 1, False),
                ("epi_gelu", 2, 1, False), ("epi_gelu_sub2", 2, 2, False),
                ("epi_gelu_sub4", 2, 4, False), ("epi_gelu_ws", 2, 1, True)]
    runs = dict(base)
    for name, epi, sub, ws in variants:
        y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        try:
            def call(y=y, epi=epi, sub=sub, ws=ws):
                gemm_kernel[grid](A, W, bias, y, M, N, K, EPI=epi, SUB=sub, WS=ws, **cfg)
            call()
            torch.cuda.synchronize()
            rec(f"{name}_err", (y.float() - refs[epi]).abs().max().item())
            runs[name] = call
        except Exception as e:  # a structure this Triton cannot compile: recorded
            rec(f"{name}_error", f"{type(e).__name__}: {str(e)[:300]}")
    y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    try:
        call = lambda: gemm_kernel_cx[grid](A, W, bias, y, M, N, K, **cfg)  # noqa: E731
        call()
        torch.cuda.synchronize()
        rec("epi_gelu_constexpr_err", (y.float() - refs[2]).abs().max().item())
        runs["epi_gelu_constexpr"] = call
    except Exception as e:
        rec("epi_gelu_constexpr_error", f"{type(e).__name__}: {str(e)[:300]}")
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(3):  # interleaved rounds: clocks drift over a run
        for k, fn in runs.items():
            times[k].append(med(fn))
    for k, ts in times.items():
        ts = sorted(ts)
        rec(k, {"ms": ts[1], "spread": (ts[-1] - ts[0]) / ts[1]})
    bare = sorted(times["bare_mm"])[1]
    rec("bare_over", {k: bare / sorted(v)[1] for k, v in times.items()})


if __name__ == "__main__":
    main()
