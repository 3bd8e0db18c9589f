"""Can an epilogue partition hide gemm_bias_gelu's bias + erf GELU behind the next tile's
matrix work on the H200? The ping-pong kernels (h200_gluon_pingpong.py) hid it but ran
128x128 tiles per consumer, whose mainloop is slower than the 128x256 one. This keeps the
128x256 tile of kevolve's Triton kernel, computed by both consumer warpgroups together
(8 warps), and adds a third role: the consumers hand the f32 accumulator to a 4-warp
epilogue partition through shared memory and go on to the next tile's MMAs while the
epilogue warps add the bias, apply GELU and store. A 1-warp producer issues the TMA loads.
Hand-written (not kevolve output); checked against float64, timed beside cuBLAS and
torch.compile in interleaved rounds.

    cd benchmarks && PYTHONPATH=..:. python3 h200_gluon_epilogue.py --out $OUT
    python3 benchmarks/h200_gluon_epilogue.py --compile-only   # sm_90 here, no GPU
"""

from __future__ import annotations

import argparse
import os

import triton
from h200_gluon_pingpong import _erfc, _tile_mn
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)


@gluon.jit
def _load(a_desc, b_desc, a_bufs, b_bufs, ready, i, total, kt, n_m, n_n,
          NPROG: gl.constexpr, GM: gl.constexpr):
    """Issue the TMA loads of this program's i-th K step (over all its tiles) into stage
    i % S, when there is one."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    S: gl.constexpr = a_bufs.type.shape[0]
    pm, pn = _tile_mn(gl.program_id(0) + (i // kt) * NPROG, n_m, n_n, GM)
    k = i % kt
    s = i % S
    p = i < total
    mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes, pred=p)
    tma.async_copy_global_to_shared(a_desc, [pm * BM, k * BK], ready.index(s), a_bufs.index(s),
                                    pred=p)
    tma.async_copy_global_to_shared(b_desc, [k * BK, pn * BN], ready.index(s), b_bufs.index(s),
                                    pred=p)


@gluon.jit
def _epilogue(a_desc, b_desc, bias, y, a_bufs, b_bufs, acc_smem, bars, M, N, K,
              NPROG: gl.constexpr, GM: gl.constexpr):
    """Four warps: wait for a tile's accumulator in shared memory, then bias + GELU + bf16
    store, RB rows at a time in a layout whose stores are 16-byte and coalesced. The
    buffer goes back to the consumers once the last rows are read."""
    ready, acc_ready, acc_empty = bars
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    RB: gl.constexpr = 4 * gl.num_warps()  # rows per step: four per warp
    blk: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [gl.num_warps(), 1], [1, 0])
    n_m = gl.cdiv(M, BM)
    n_n = gl.cdiv(N, BN)
    j = 0
    for t in range(gl.program_id(0), n_m * n_n, NPROG):
        pm, pn = _tile_mn(t, n_m, n_n, GM)
        rn = pn * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, blk))
        b = gl.load(bias + rn).to(gl.float32)
        mbarrier.wait(acc_ready, j & 1)
        for r in gl.static_range(BM // RB):
            v = acc_smem.slice(r * RB, RB, dim=0).load(blk) + b[None, :]
            if r == BM // RB - 1:
                mbarrier.arrive(acc_empty)
            out = 0.5 * v * _erfc(-(v * 0.7071067811865476))
            rm = pm * BM + r * RB + gl.arange(0, RB, layout=gl.SliceLayout(1, blk))
            gl.store(y + rm[:, None] * N + rn[None, :], out.to(gl.bfloat16))
        j += 1


@gluon.jit
def _consumers(a_desc, b_desc, a_bufs, b_bufs, acc_smem, bars, M, N, K, NPROG: gl.constexpr,
               GM: gl.constexpr):
    """The default partition, 8 warps (two warpgroups, 64 rows each): the TMA loads S - 1
    K steps ahead (across tile boundaries) and the MMAs of every tile, then the
    accumulator into shared memory for the epilogue partition. Issuing the loads here
    rather than from a producer warp keeps the kernel at 12 warps, so each can hold the
    168 registers a 128x256 accumulator needs."""
    ready, acc_ready, acc_empty = bars
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    S: gl.constexpr = a_bufs.type.shape[0]
    acc_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0],
                                                   warps_per_cta=[gl.num_warps(), 1],
                                                   instr_shape=[16, BN, 16])
    n_m = gl.cdiv(M, BM)
    n_n = gl.cdiv(N, BN)
    kt = gl.cdiv(K, BK)
    total = gl.cdiv(n_m * n_n - gl.program_id(0), NPROG) * kt
    for i in gl.static_range(S - 1):
        _load(a_desc, b_desc, a_bufs, b_bufs, ready, i, total, kt, n_m, n_n, NPROG, GM)
    it = 0
    j = 0
    for t in range(gl.program_id(0), n_m * n_n, NPROG):
        acc = gl.zeros([BM, BN], gl.float32, acc_l)
        for k in range(kt):
            s = it % S
            mbarrier.wait(ready.index(s), (it // S) & 1)
            acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
            # the MMA before this one is done: its stage takes the load S - 1 steps ahead
            acc = warpgroup_mma_wait(1, deps=[acc])
            _load(a_desc, b_desc, a_bufs, b_bufs, ready, it + S - 1, total, kt, n_m, n_n,
                  NPROG, GM)
            it += 1
        acc = warpgroup_mma_wait(0, deps=[acc])
        mbarrier.wait(acc_empty, (j & 1) ^ 1)
        acc_smem.store(acc)
        mbarrier.arrive(acc_ready)
        j += 1


@gluon.jit
def k_epi(a_desc, b_desc, bias, y, M, N, K, NPROG: gl.constexpr, GM: gl.constexpr,
          STAGES: gl.constexpr, RB: gl.constexpr, EPI_WARPS: gl.constexpr,
          EPI_REGS: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BM, BK], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BK, BN], b_desc.layout)
    acc_smem = gl.allocate_shared_memory(
        gl.float32, [BM, BN], gl.SwizzledSharedLayout(vec=4, per_phase=1, max_phase=8,
                                                      order=[1, 0]))
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    acc_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    acc_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
    mbarrier.init(acc_ready, count=1)
    mbarrier.init(acc_empty, count=1)
    bars = (ready, acc_ready, acc_empty)
    w = (a_desc, b_desc, bias, y, a_bufs, b_bufs, acc_smem, bars, M, N, K, NPROG, GM)
    gl.warp_specialize([(_consumers, (a_desc, b_desc, a_bufs, b_bufs, acc_smem, bars, M, N,
                                      K, NPROG, GM)),
                        (_epilogue, w)], [EPI_WARPS], [EPI_REGS])


def layouts(BM: int, BN: int, BK: int):
    return (gl.NVMMASharedLayout.get_default_for([BM, BK], gl.bfloat16),
            gl.NVMMASharedLayout.get_default_for([BK, BN], gl.bfloat16))


# (BM, BN, BK, stages, epilogue rows per step, epilogue warps, epilogue registers, maxnreg)
VARIANTS = [(128, 256, 32, 4, 16, 4, 120, 168), (128, 256, 32, 3, 16, 4, 120, 168),
            (128, 256, 64, 2, 16, 4, 120, 168), (128, 256, 32, 4, 16, 4, 112, 168)]


def compile_only(nprog=132) -> None:
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    for BM, BN, BK, stages, rb, ew, er, mr in VARIANTS:
        la, lb = layouts(BM, BN, BK)
        sig = {"a_desc": f"tensordesc<bf16[{BM}, {BK}],{la!r}>",
               "b_desc": f"tensordesc<bf16[{BK}, {BN}],{lb!r}>", "bias": "*bf16",
               "y": "*bf16", "M": "i32", "N": "i32", "K": "i32", "NPROG": "constexpr",
               "GM": "constexpr", "STAGES": "constexpr", "RB": "constexpr",
               "EPI_WARPS": "constexpr", "EPI_REGS": "constexpr"}
        src = GluonASTSource(k_epi, sig, {"NPROG": nprog, "GM": 8, "STAGES": stages,
                                          "RB": rb, "EPI_WARPS": ew, "EPI_REGS": er})
        ck = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": 8, "maxnreg": mr})
        sass = disassemble(ck.asm["cubin"])
        print(f"{BM}x{BN}x{BK} s{stages} epilogue {ew} warps {er} regs: shared",
              ck.metadata.shared, "spill stores", sass.count("STL"), "HGMMA",
              sass.count("HGMMA"), "MUFU", sass.count("MUFU"))


def disassemble(cubin: bytes) -> str:
    """SASS of a cubin through the cuobjdump that ships with Triton."""
    import subprocess
    import tempfile

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                        "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, "-sass", f.name], capture_output=True, text=True,
                              check=True).stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--compile-only", action="store_true")
    args = ap.parse_args()
    if args.compile_only:
        compile_only()
        return
    import torch
    from h200_erf_store_stream import interleaved
    from h200_triton_structures import recorder
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    rec = recorder(os.path.join(args.out, "gluon-epilogue.json"))
    M, K, N = 8192, 4096, 4096
    A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    W = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / 64
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16) * 0.5
    ref = torch.nn.functional.gelu(torch.addmm(bias.double(), A.double(), W.double()))
    f = torch.compile(lambda a, w, b: torch.nn.functional.gelu(torch.addmm(b, a, w)))
    f(A, W, bias)
    nsm = torch.cuda.get_device_properties(0).multi_processor_count
    runs = {"bare_mm": lambda: A @ W, "compile": lambda: f(A, W, bias)}
    for BM, BN, BK, stages, rb, ew, er, mr in VARIANTS:
        name = f"epi_{BM}x{BN}x{BK}_s{stages}_rb{rb}_w{ew}_r{er}_m{mr}"
        la, lb = layouts(BM, BN, BK)
        ad = TensorDescriptor.from_tensor(A, [BM, BK], la)
        wd = TensorDescriptor.from_tensor(W, [BK, BN], lb)
        y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        try:
            def call(ad=ad, wd=wd, y=y, stages=stages, rb=rb, ew=ew, er=er, mr=mr):
                k_epi[(nsm,)](ad, wd, bias, y, M, N, K, NPROG=nsm, GM=8, STAGES=stages,
                              RB=rb, EPI_WARPS=ew, EPI_REGS=er, num_warps=8, maxnreg=mr)
            call()
            torch.cuda.synchronize()
            rec(name + "_err", (y.double() - ref).abs().max().item())
            runs[name] = call
        except Exception as e:
            rec(name + "_error", f"{type(e).__name__}: {str(e)[:400]}")
    times = interleaved(runs, rec, args.rounds, "epi_")
    bare = times["bare_mm"]["ms"]
    rec("bare_over", {k: bare / v["ms"] for k, v in times.items()})


if __name__ == "__main__":
    main()
