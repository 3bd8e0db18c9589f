"""Does an epilogue that overlaps the matrix work close gemm_bias_gelu's gap to cuBLAS on the
H200? Triton 3.6 generates no such kernel from `tl` code (h200_gemm_mainloop.py), but its
Gluon dialect exposes the pieces: the copy engine (TMA) into a ring of shared-memory
stages completing on mbarriers, warpgroup MMAs, and warp specialization. This is one
hand-written Gluon kernel of that shape (not kevolve output): persistent programs, a
1-warp producer partition issuing the TMA loads of every tile of the program in order,
and two 4-warp consumer partitions taking alternate tiles, each from its own ring of
stages, so one's bias + erf GELU epilogue runs while the other's MMAs use the tensor
cores (the "ping-pong" schedule).
Checked against float64, timed beside cuBLAS and torch.compile in interleaved rounds.

Results: with one ring per consumer (`--rings 2`, h200-gluon-pingpong.json) correct at
every tile shape but 0.55 ms at best against cuBLAS's 0.38: the active mainloop has only
its ring's 2-3 stages in flight. With one ring the consumers share, taking turns at the
MMAs through mbarriers (`--rings 1`, h200-gluon-pingpong-shared.json), 0.496 ms at
128x128x64 with 5 stages against cuBLAS's 0.404 and torch.compile's 0.466 on that
machine. Still slower than kevolve's Triton kernel (0.449 ms in the ranking run). The
128x256 tile with an epilogue partition instead: h200_gluon_epilogue.py.

    cd benchmarks && PYTHONPATH=..:. python3 h200_gluon_pingpong.py --out $OUT   # pingpong.json
    python3 benchmarks/h200_gluon_pingpong.py --compile-only   # sm_90 PTX here, no GPU
"""

from __future__ import annotations

import argparse
import os

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)


@gluon.jit
def _erfc(w):
    """The Triton backend's branch-free erfc (templates/triton/module.j2), in Gluon."""
    z = gl.abs(w)
    t = gl.fdiv(1.0, 1.0 + 0.5 * z)
    p = -0.82215223 + t * 0.17087277
    p = 1.48851587 + t * p
    p = -1.13520398 + t * p
    p = 0.27886807 + t * p
    p = -0.18628806 + t * p
    p = 0.09678418 + t * p
    p = 0.37409196 + t * p
    p = 1.00002368 + t * p
    p = -1.26551223 + t * p
    r = t * gl.exp(-z * z + p)
    return gl.where(w >= 0, r, 2.0 - r)


@gluon.jit
def _tile_mn(t, n_m, n_n, GM: gl.constexpr):
    """Grouped tile order (GM rows of tiles at a time), as the Triton kernels use."""
    g = GM * n_n
    first = (t // g) * GM
    size = gl.minimum(n_m - first, GM)
    return first + (t % g) % size, (t % g) // size


@gluon.jit
def _producer(a_desc, b_desc, bias, y, a_bufs, b_bufs, ready, empty, turn, M, N, K,
              NPROG: gl.constexpr, GM: gl.constexpr, RINGS: gl.constexpr,
              PARITY: gl.constexpr):
    """One warp: the TMA loads of every tile of this program, in order. With RINGS = 2
    tile j goes to ring j % 2 (stages [r*S, r*S + S)), the ring of the consumer that
    takes it; with RINGS = 1 every tile goes through one ring. A stage is refilled only
    after its consumer released it."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    S: gl.constexpr = a_bufs.type.shape[0] // RINGS
    n_m = gl.cdiv(M, BM)
    n_n = gl.cdiv(N, BN)
    kt = gl.cdiv(K, BK)
    j = 0
    for t in range(gl.program_id(0), n_m * n_n, NPROG):
        pm, pn = _tile_mn(t, n_m, n_n, GM)
        for k in range(kt):
            it = (j // RINGS) * kt + k  # this ring's iteration
            s = (j % RINGS) * S + it % S
            mbarrier.wait(empty.index(s), ((it // S) & 1) ^ 1)
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [pm * BM, k * BK], ready.index(s),
                                            a_bufs.index(s))
            tma.async_copy_global_to_shared(b_desc, [k * BK, pn * BN], ready.index(s),
                                            b_bufs.index(s))
        j += 1


@gluon.jit
def _consumer(a_desc, b_desc, bias, y, a_bufs, b_bufs, ready, empty, turn, M, N, K,
              NPROG: gl.constexpr, GM: gl.constexpr, RINGS: gl.constexpr,
              PARITY: gl.constexpr):
    """Four warps: MMAs of every other tile of this program (PARITY picks which), then
    its bias + GELU epilogue and store, while the other consumer runs its MMAs. On one
    shared ring (RINGS = 1) the consumers take turns at the MMAs through the `turn`
    mbarriers, so neither waits on a stage two fills ahead of the barrier's phase."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    S: gl.constexpr = a_bufs.type.shape[0] // RINGS
    acc_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                   instr_shape=[16, BN, 16])
    n_m = gl.cdiv(M, BM)
    n_n = gl.cdiv(N, BN)
    kt = gl.cdiv(K, BK)
    j = 0  # this program's tile counter (each partition counts every tile)
    for t in range(gl.program_id(0), n_m * n_n, NPROG):
        if j % 2 == PARITY:
            pm, pn = _tile_mn(t, n_m, n_n, GM)
            base = (j % RINGS) * S
            if RINGS == 1:  # wait until the other consumer has had its last stage
                m = j // 2
                if PARITY == 1:
                    mbarrier.wait(turn.index(1), m & 1)
                else:
                    mbarrier.wait(turn.index(0), (m - 1) & 1, pred=m > 0)
            acc = gl.zeros([BM, BN], gl.float32, acc_l)
            for k in range(kt):
                it = (j // RINGS) * kt + k
                s = base + it % S
                mbarrier.wait(ready.index(s), (it // S) & 1)
                acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
                # the MMA before this one is done: its stage goes back to the producer
                acc = warpgroup_mma_wait(1, deps=[acc])
                mbarrier.arrive(empty.index(base + (it + S - 1) % S), pred=k > 0)
            if RINGS == 1:
                mbarrier.arrive(turn.index(1 - PARITY))
            acc = warpgroup_mma_wait(0, deps=[acc])
            last = (j // RINGS) * kt + kt - 1
            mbarrier.arrive(empty.index(base + last % S))
            rm = pm * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, acc_l))
            rn = pn * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, acc_l))
            v = acc + gl.load(bias + rn).to(gl.float32)[None, :]
            out = 0.5 * v * _erfc(-(v * 0.7071067811865476))
            gl.store(y + rm[:, None] * N + rn[None, :], out.to(gl.bfloat16))
        j += 1


@gluon.jit
def k_pingpong(a_desc, b_desc, bias, y, M, N, K, NPROG: gl.constexpr, GM: gl.constexpr,
               STAGES: gl.constexpr, RINGS: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    # RINGS rings of STAGES stages: one per consumer, or one they share taking turns
    a_bufs = gl.allocate_shared_memory(gl.bfloat16, [RINGS * STAGES, BM, BK], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(gl.bfloat16, [RINGS * STAGES, BK, BN], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [RINGS * STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [RINGS * STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(RINGS * STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)
    c0 = (a_desc, b_desc, bias, y, a_bufs, b_bufs, ready, empty, turn, M, N, K, NPROG, GM,
          RINGS, gl.constexpr(0))
    c1 = (a_desc, b_desc, bias, y, a_bufs, b_bufs, ready, empty, turn, M, N, K, NPROG, GM,
          RINGS, gl.constexpr(1))
    gl.warp_specialize([(_consumer, c0), (_consumer, c1), (_producer, c0)], [4, 1], [240, 24])


def layouts(BM: int, BN: int, BK: int):
    return (gl.NVMMASharedLayout.get_default_for([BM, BK], gl.bfloat16),
            gl.NVMMASharedLayout.get_default_for([BK, BN], gl.bfloat16))


def compile_only(BM=128, BN=128, BK=64, stages=3, nprog=132, rings=2) -> None:
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    la, lb = layouts(BM, BN, BK)
    sig = {"a_desc": f"tensordesc<bf16[{BM}, {BK}],{la!r}>",
           "b_desc": f"tensordesc<bf16[{BK}, {BN}],{lb!r}>", "bias": "*bf16", "y": "*bf16",
           "M": "i32", "N": "i32", "K": "i32", "NPROG": "constexpr", "GM": "constexpr",
           "STAGES": "constexpr", "RINGS": "constexpr"}
    src = GluonASTSource(k_pingpong, sig, {"NPROG": nprog, "GM": 8, "STAGES": stages,
                                           "RINGS": rings})
    ck = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                        options={"num_warps": 4, "maxnreg": 168})
    ptx = ck.asm["ptx"]
    print("shared", ck.metadata.shared, "wgmma", ptx.count("wgmma.mma_async"),
          "tma", ptx.count("cp.async.bulk.tensor"), "setmaxnreg", ptx.count("setmaxnreg"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--rings", type=int, choices=[1, 2], default=2,
                    help="2: one ring of stages per consumer (pingpong.json); 1: one ring "
                    "the consumers share, taking turns (pingpong-shared.json)")
    args = ap.parse_args()
    if args.compile_only:
        compile_only(rings=args.rings)
        return
    import torch
    from h200_erf_store_stream import add_checked, interleaved
    from h200_triton_structures import recorder
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    rec = recorder(os.path.join(args.out, "pingpong.json" if args.rings == 2
                                else "pingpong-shared.json"))
    M, K, N = 8192, 4096, 4096
    A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    W = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / 64
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16) * 0.5
    ref = torch.nn.functional.gelu(torch.addmm(bias.double(), A.double(), W.double()))
    f = torch.compile(lambda a, w, b: torch.nn.functional.gelu(torch.addmm(b, a, w)))
    f(A, W, bias)
    nsm = torch.cuda.get_device_properties(0).multi_processor_count
    runs = {"bare_mm": lambda: A @ W, "compile": lambda: f(A, W, bias)}
    shapes = [(64, 256, 64, 2), (64, 256, 32, 4), (128, 128, 64, 3), (128, 128, 64, 2)] \
        if args.rings == 2 else [(128, 128, 64, 6), (128, 128, 64, 5), (64, 256, 64, 5),
                                 (64, 256, 32, 8)]
    for BM, BN, BK, stages in shapes:
        name = f"pingpong_{BM}x{BN}x{BK}_s{stages}"
        la, lb = layouts(BM, BN, BK)
        ad = TensorDescriptor.from_tensor(A, [BM, BK], la)
        wd = TensorDescriptor.from_tensor(W, [BK, BN], lb)
        y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        def call(ad=ad, wd=wd, y=y, stages=stages):
            k_pingpong[(nsm,)](ad, wd, bias, y, M, N, K, NPROG=nsm, GM=8, STAGES=stages,
                               RINGS=args.rings, num_warps=4, maxnreg=168)
        add_checked(runs, rec, name, call, y, ref)
    times = interleaved(runs, rec, args.rounds, "pingpong_")
    bare = times["bare_mm"]["ms"]
    rec("bare_over", {k: bare / v["ms"] for k, v in times.items()})


if __name__ == "__main__":
    main()
