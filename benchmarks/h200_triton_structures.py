"""Hand-written Triton kernels on the H200, to learn which kernel *structure* can reach the
gemm_bias_gelu and dot_interaction targets before building it into the lowering: for
gemm_bias_gelu (8192x4096x4096 bf16, erf GELU epilogue) pointer loads, TMA descriptor loads
and persistent TMA kernels (flattened or not, warp-specialized or not) at four tile
configurations, beside cuBLAS's bare matmul and torch.compile; for dot_interaction
(16384x27x128 f32) samples per program (1-8, a batched tl.dot), d-chunk, warps, and one or
two loads of the shared tile, beside eager and torch.compile. Outputs are checked against
float64/float32 references (max error in the JSON). Not kevolve output: reference points.

    PYTHONPATH=. python3 benchmarks/h200_triton_structures.py   # writes $OUT/exp1.json

Its committed output is benchmarks/results/h200-triton-structures.json (from the same
kernels and loops before this file was tidied into functions for the linter).
"""

from __future__ import annotations

import json
import os

import torch
import triton
import triton.language as tl
from triton.testing import do_bench


def recorder(path: str):
    res: dict = {}

    def rec(k, v):
        res[k] = v
        print(k, v, flush=True)
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
    return rec


def median_ms(fn) -> float:
    return do_bench(fn, return_mode="median")


# ---------------- gemm_bias_gelu ----------------

@triton.jit
def gelu(v):
    return 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))


@triton.jit
def tile_of(t, npm, npn, GM: tl.constexpr):
    """Grouped order of the Triton matmul tutorial: (pid_m, pid_n) of program/tile t."""
    g = GM * npn
    fm = (t // g) * GM
    gs = min(npm - fm, GM)
    return fm + (t % g) % gs, (t % g) // gs


@triton.jit
def gemm_descs(a, w, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Tensor descriptors of A [M, K], W [K, N] and y [M, N] (row-major) with the tiles of
    a BM x BN x BK matmul."""
    ad = tl.make_tensor_descriptor(a, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    wd = tl.make_tensor_descriptor(w, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    yd = tl.make_tensor_descriptor(y, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    return ad, wd, yd


@triton.jit
def ptr_dot(a, w, rm, rn, K, N, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """A[rm, :] @ W[:, rn] in f32 from pointer tiles, BK columns of A at a time: the K loop
    of every pointer-load study kernel (inlined by Triton: the same code as written out)."""
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        z = tl.load(w + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(x, z, acc)
    return acc


@triton.jit
def desc_dot(ad, wd, pm, pn, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """The same tile through tensor descriptors of A and W (TMA loads)."""
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(ad.load([pm * BM, k]), wd.load([k, pn * BN]), acc)
    return acc


@triton.jit
def k_ptr(a, w, b, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
          GM: tl.constexpr):
    pm, pn = tile_of(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GM)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = ptr_dot(a, w, rm, rn, K, N, BM, BN, BK)
    acc += tl.load(b + rn).to(tl.float32)[None, :]
    tl.store(y + rm[:, None] * N + rn[None, :], gelu(acc).to(tl.bfloat16))


@triton.jit
def k_tma(a, w, b, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
          GM: tl.constexpr):
    ad, wd, yd = gemm_descs(a, w, y, M, N, K, BM, BN, BK)
    pm, pn = tile_of(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GM)
    acc = desc_dot(ad, wd, pm, pn, K, BM, BN, BK)
    rn = pn * BN + tl.arange(0, BN)
    acc += tl.load(b + rn).to(tl.float32)[None, :]
    yd.store([pm * BM, pn * BN], gelu(acc).to(tl.bfloat16))


@triton.jit
def k_tma_p(a, w, b, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            GM: tl.constexpr, NSM: tl.constexpr, FLAT: tl.constexpr, WS: tl.constexpr):
    ad, wd, yd = gemm_descs(a, w, y, M, N, K, BM, BN, BK)
    npm = tl.cdiv(M, BM)
    npn = tl.cdiv(N, BN)
    for t in tl.range(tl.program_id(0), npm * npn, NSM, flatten=FLAT, warp_specialize=WS):
        pm, pn = tile_of(t, npm, npn, GM)
        acc = desc_dot(ad, wd, pm, pn, K, BM, BN, BK)
        rn = pn * BN + tl.arange(0, BN)
        acc += tl.load(b + rn).to(tl.float32)[None, :]
        yd.store([pm * BM, pn * BN], gelu(acc).to(tl.bfloat16))


def gemm_study(rec) -> None:
    M, K, N = 8192, 4096, 4096
    A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    W = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / 64
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16) * 0.5
    ref = torch.nn.functional.gelu(torch.addmm(bias.float(), A.float(), W.float()))
    rec("bare_mm", median_ms(lambda: A @ W))
    f = torch.compile(lambda a, w, b: torch.nn.functional.gelu(torch.addmm(b, a, w)))
    f(A, W, bias)
    rec("compile", median_ms(lambda: f(A, W, bias)))
    nsm = torch.cuda.get_device_properties(0).multi_processor_count

    def run(name, kern, grid, **kw):
        try:
            y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            kern[grid](A, W, bias, y, M, N, K, **kw)
            torch.cuda.synchronize()
            err = (y.float() - ref).abs().max().item()
            rec(name, {"ms": median_ms(lambda: kern[grid](A, W, bias, y, M, N, K, **kw)),
                       "err": err})
        except Exception as e:
            rec(name, {"error": f"{type(e).__name__}: {str(e)[:300]}"})

    cfgs = [(128, 256, 64, 8, 3), (128, 128, 64, 4, 4), (128, 256, 64, 8, 4),
            (256, 128, 64, 8, 3)]
    for BM, BN, BK, nw, ns in cfgs:
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        kw = dict(BM=BM, BN=BN, BK=BK, GM=8, num_warps=nw, num_stages=ns)
        tag = f"{BM}x{BN}x{BK}_w{nw}_s{ns}"
        run(f"gemm_ptr_{tag}", k_ptr, grid, **kw)
        run(f"gemm_tma_{tag}", k_tma, grid, **kw)
        for flat in (False, True):
            for ws in (False, True):
                run(f"gemm_tmap_{tag}_f{int(flat)}_ws{int(ws)}", k_tma_p, (nsm,),
                    NSM=nsm, FLAT=flat, WS=ws, **kw)


# ---------------- dot_interaction ----------------

@triton.jit
def di_k(x, z, Bn, F: tl.constexpr, D: tl.constexpr, BB: tl.constexpr, BD: tl.constexpr,
         PREC: tl.constexpr, TWO: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    rb = pid * BB + tl.arange(0, BB)[:, None, None]
    ri = tl.arange(0, 32)[None, :, None]
    bm = rb < Bn
    acc = tl.zeros([BB, 32, 32], tl.float32)
    for d0 in range(0, D, BD):
        rd = d0 + tl.arange(0, BD)[None, None, :]
        t = tl.load(x + rb * (F * D) + ri * D + rd, mask=bm & (ri < F), other=0.0)
        if TWO:
            u = tl.load(x + rb * (F * D) + ri * D + rd, mask=bm & (ri < F), other=0.0)
        else:
            u = t
        acc = tl.dot(t, tl.trans(u, (0, 2, 1)), acc, input_precision=PREC)
    i = tl.arange(0, 32)[None, :, None]
    j = tl.arange(0, 32)[None, None, :]
    P: tl.constexpr = F * (F - 1) // 2
    tl.store(z + rb * P + (i * (i - 1)) // 2 + j, acc, mask=bm & (j < i) & (i < F))


def dot_study(rec) -> None:
    B, F, D = 16384, 27, 128
    X = torch.randn(B, F, D, device="cuda")
    li, lj = torch.tril_indices(F, F, offset=-1, device="cuda")
    Zr = torch.bmm(X.double(), X.double().transpose(1, 2))[:, li, lj]
    rec("di_eager", median_ms(lambda: torch.bmm(X, X.transpose(1, 2))[:, li, lj]))
    fc = torch.compile(lambda x: torch.bmm(x, x.transpose(1, 2))[:, li, lj])
    fc(X)
    rec("di_compile", median_ms(lambda: fc(X)))
    rec("di_copy_X", median_ms(lambda: X.clone()))
    for BB in (1, 2, 4, 8):
        for BD in (32, 64, 128):
            for nw in (2, 4, 8):
                for prec in ("tf32x3",):
                    for two in ((True, False) if BB == 1 else (False,)):
                        name = f"di_bb{BB}_bd{BD}_w{nw}_{prec}_two{int(two)}"
                        try:
                            Z = torch.full((B, F * (F - 1) // 2), float("nan"), device="cuda")
                            g = (triton.cdiv(B, BB),)
                            kw = dict(F=F, D=D, BB=BB, BD=BD, PREC=prec, TWO=two,
                                      num_warps=nw, num_stages=2)
                            di_k[g](X, Z, B, **kw)
                            torch.cuda.synchronize()
                            err = (Z.double() - Zr).abs().max().item()
                            rec(name, {"ms": median_ms(lambda g=g, Z=Z, kw=kw:
                                                       di_k[g](X, Z, B, **kw)), "err": err})
                        except Exception as e:
                            rec(name, {"error": f"{type(e).__name__}: {str(e)[:300]}"})


def main() -> None:
    triton.set_allocator(lambda size, alignment, stream:
                         torch.empty(size, device="cuda", dtype=torch.int8))
    rec = recorder(os.path.join(os.environ.get("OUT", "."), "exp1.json"))
    gemm_study(rec)
    dot_study(rec)


if __name__ == "__main__":
    main()
