"""Can an epilogue partition hide gemm_bias_gelu's bias + erf GELU behind the next tile's
matrix work on the H200? The ping-pong kernels (h200_gluon_pingpong.py) take turns on
128x128 tiles and reached 0.81 of cuBLAS. These keep the 128x256 tile of kevolve's Triton
kernel, computed by both consumer warpgroups together (8 warps, the default partition), fed
by a 1-warp TMA producer:
- k_epi: the consumers hand the f32 accumulator to a 2-warp epilogue partition through
  shared memory (128 KiB, so 4 stages of 128x32 + 32x256) and go on to the next tile's
  MMAs while the epilogue warps add the bias, apply GELU and store. MODE 1-4 are
  diagnostics: the handoff with no epilogue work, the mainloop alone, bias only, a tanh
  GELU (not the op's).
- k_split: the same, but the consumers keep the last 64-column quarter's epilogue.
- k_reg: no handoff; the epilogue from the consumers' registers while the producer loads
  the next tile.
Hand-written (not kevolve output); checked against float64, timed beside cuBLAS, torch
.compile, cuBLASLt's fused bias + GELU (tanh) and kevolve's archived best Triton kernel in
interleaved rounds, on the op's own inputs.

Results (h200-gluon-epilogue.json, 15 rounds; cuBLAS 0.408 ms): the mainloop alone 0.99 of
cuBLAS; with the handoff but no epilogue work 0.99; bias only 0.95; tanh GELU 0.94; the erf
GELU 0.88 (1.002x torch.compile; kevolve's Triton kernel 0.87); k_split 0.86; k_reg 0.86;
cuBLASLt's fused tanh GELU 0.97. So the mainloop keeps up with cuBLAS, and the erf GELU's
arithmetic slows it wherever it runs on the SM.
Two things found on the way (earlier versions of this script, results not kept): the
epilogue loop must not be unrolled (a static_range over the rows made ~30k instructions,
likely too many for the instruction cache: 0.94 ms, against 0.46 as a loop), and
Triton 3.6 fails to lower a global store from the MMA layout inside a branch of the
warp-specialized default partition (k_reg stores by quarters instead).

    cd benchmarks && PYTHONPATH=..:. python3 h200_gluon_epilogue.py --rounds 15 --out $OUT
    python3 benchmarks/h200_gluon_epilogue.py --compile-only   # sm_90 here, no GPU
"""

from __future__ import annotations

import argparse
import os

import triton
from h200_erfc_libdevice import ARCHIVE
from h200_gluon_pingpong import _tile_mn
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.language.extra import libdevice


@gluon.jit
def _producer(a_desc, b_desc, bias, y, a_bufs, b_bufs, acc_smem, bars, M, N, K,
              NPROG: gl.constexpr, GM: gl.constexpr, MODE: gl.constexpr):
    """One warp: every tile's TMA loads into the stage ring, a stage refilled
    only after the consumers released it on its `empty` barrier."""
    ready, empty, acc_ready, acc_empty = bars
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    S: gl.constexpr = a_bufs.type.shape[0]
    n_m = gl.cdiv(M, BM)
    n_n = gl.cdiv(N, BN)
    kt = gl.cdiv(K, BK)
    it = 0
    for t in range(gl.program_id(0), n_m * n_n, NPROG):
        pm, pn = _tile_mn(t, n_m, n_n, GM)
        for k in range(kt):
            s = it % S
            mbarrier.wait(empty.index(s), ((it // S) & 1) ^ 1)
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [pm * BM, k * BK], ready.index(s),
                                            a_bufs.index(s))
            tma.async_copy_global_to_shared(b_desc, [k * BK, pn * BN], ready.index(s),
                                            b_bufs.index(s))
            it += 1


@gluon.jit
def _erfc(w):
    """The Triton backend's branch-free erfc as it renders for a GPU (log2 e folded into
    the fit; libdevice's reciprocal and exp2), in Gluon."""
    z = gl.abs(w)
    t = libdevice.fast_dividef(1.0, 1.0 + 0.5 * z)
    p = -1.1861149450768025 + t * 0.24651729790196045
    p = 2.147474463933521 + t * p
    p = -1.637753152343414 + t * p
    p = 0.40232158165127635 + t * p
    p = -0.2687568603388257 + t * p
    p = 0.1396300565225048 + t * p
    p = 0.5397006155284324 + t * p
    p = 1.4427292039075317 + t * p
    p = -1.825748218405333 + t * p
    r = t * libdevice.exp2((z * -1.4426950408889634) * z + p)
    return gl.where(w >= 0, r, 2.0 - r)


@gluon.jit
def _tile_mmas(a_bufs, b_bufs, ready, empty, it, K):
    """One tile's K loop from the producer's stage ring, starting at the ring's step `it`,
    in the calling partition's warpgroups (64 rows each): each stage goes back to the
    producer on `empty` once the MMA after it is issued and its own is done. Returns the
    accumulator and the next step."""
    S: gl.constexpr = a_bufs.type.shape[0]
    BM: gl.constexpr = a_bufs.type.shape[1]
    BK: gl.constexpr = a_bufs.type.shape[2]
    BN: gl.constexpr = b_bufs.type.shape[2]
    acc_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0],
                                                   warps_per_cta=[gl.num_warps(), 1],
                                                   instr_shape=[16, BN, 16])
    acc = gl.zeros([BM, BN], gl.float32, acc_l)
    for k in range(gl.cdiv(K, BK)):
        s = it % S
        mbarrier.wait(ready.index(s), (it // S) & 1)
        acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
        # the MMA before this one is done: its stage goes back to the producer
        acc = warpgroup_mma_wait(1, deps=[acc])
        mbarrier.arrive(empty.index((it + S - 1) % S), pred=k > 0)
        it += 1
    acc = warpgroup_mma_wait(0, deps=[acc])
    mbarrier.arrive(empty.index((it + S - 1) % S))
    return acc, it


@gluon.jit
def _quarters(acc):
    """The accumulator's four 64-column quarters, in column order (column = 128 h + 64 g +
    x): register relabelling, no data movement."""
    BM: gl.constexpr = acc.type.shape[0]
    BN: gl.constexpr = acc.type.shape[1]
    g0, g1 = gl.split(gl.permute(gl.reshape(acc, [BM, 2, 2, BN // 4]), [0, 3, 1, 2]))
    c0, c2 = gl.split(g0)
    c1, c3 = gl.split(g1)
    return c0, c1, c2, c3


@gluon.jit
def _ring(a_desc, b_desc, STAGES: gl.constexpr):
    """The stage ring the producer fills: A and B buffers and their ready / empty
    mbarriers."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BM, BK], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BK, BN], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    return a_bufs, b_bufs, ready, empty


@gluon.jit
def _handoff_bars():
    """acc_ready (consumers to epilogue) and acc_empty (back) for the handoff buffer."""
    acc_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    acc_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(acc_ready, count=1)
    mbarrier.init(acc_empty, count=1)
    return acc_ready, acc_empty


@gluon.jit
def _epilogue(a_desc, b_desc, bias, y, a_bufs, b_bufs, acc_smem, bars, M, N, K,
              NPROG: gl.constexpr, GM: gl.constexpr, MODE: gl.constexpr):
    """EPI_WARPS warps: wait for a tile's accumulator in shared memory, then bias + GELU +
    bf16 store, RB rows at a time in a layout whose stores are 16-byte and coalesced. The
    buffer goes back to the consumers once the last rows are read. MODE 1 (diagnostic)
    hands the buffer straight back: the kernel without its epilogue work."""
    ready, empty, acc_ready, acc_empty = bars
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    RB: gl.constexpr = 4 * gl.num_warps()  # rows per step: four per warp
    blk: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [gl.num_warps(), 1], [1, 0])
    # the buffer as BM // RB row blocks: the same bytes while RB is a multiple of the
    # swizzle's 8-row period
    steps = acc_smem._reinterpret(gl.float32, [BM // RB, RB, BN], acc_smem.layout)
    n_m = gl.cdiv(M, BM)
    n_n = gl.cdiv(N, BN)
    j = 0
    for t in range(gl.program_id(0) + n_m * n_n * (MODE == 2), n_m * n_n, NPROG):
        pm, pn = _tile_mn(t, n_m, n_n, GM)
        rn = pn * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, blk))
        b = gl.load(bias + rn).to(gl.float32)
        mbarrier.wait(acc_ready, j & 1)
        if MODE == 1:
            mbarrier.arrive(acc_empty)
        else:
            for r in range(BM // RB):  # a loop, not unrolled: the code stays in cache
                v = steps.index(r).load(blk) + b[None, :]
                if r == BM // RB - 1:
                    mbarrier.arrive(acc_empty)
                if MODE == 3:  # diagnostic: bias only
                    out = v
                elif MODE == 4:  # diagnostic: tanh GELU on the MUFU (not the op's GELU)
                    u = 0.7978845608 * (v + 0.044715 * v * v * v)
                    th = gl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [u],
                                                   dtype=gl.float32, is_pure=True, pack=1)
                    out = 0.5 * v * (1.0 + th)
                else:
                    out = 0.5 * v * _erfc(-(v * 0.7071067811865476))
                rm = pm * BM + r * RB + gl.arange(0, RB, layout=gl.SliceLayout(1, blk))
                gl.store(y + rm[:, None] * N + rn[None, :], out.to(gl.bfloat16))
        j += 1


@gluon.jit
def _consumers(a_desc, b_desc, bias, y, a_bufs, b_bufs, acc_smem, bars, M, N, K,
               NPROG: gl.constexpr, GM: gl.constexpr, MODE: gl.constexpr):
    """The default partition, 8 warps (two warpgroups, 64 rows each): the MMAs of every
    tile, a stage going back to the producer on `empty` once its MMAs are done, then the
    accumulator into shared memory for the epilogue partition. MODE 2 (diagnostic) skips
    the handoff: the mainloop alone."""
    ready, empty, acc_ready, acc_empty = bars
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    n_m = gl.cdiv(M, BM)
    n_n = gl.cdiv(N, BN)
    it = 0
    j = 0
    for _t in range(gl.program_id(0), n_m * n_n, NPROG):
        acc, it = _tile_mmas(a_bufs, b_bufs, ready, empty, it, K)
        if MODE != 2:
            mbarrier.wait(acc_empty, (j & 1) ^ 1)
        acc_smem.store(acc)  # in MODE 2 too, or the MMAs would be dead code
        if MODE != 2:
            mbarrier.arrive(acc_ready)
        j += 1


@gluon.jit
def k_epi(a_desc, b_desc, bias, y, M, N, K, NPROG: gl.constexpr, GM: gl.constexpr,
          STAGES: gl.constexpr, EPI_WARPS: gl.constexpr, EPI_REGS: gl.constexpr,
          MODE: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    a_bufs, b_bufs, ready, empty = _ring(a_desc, b_desc, STAGES)
    acc_smem = gl.allocate_shared_memory(
        gl.float32, [BM, BN], gl.SwizzledSharedLayout(vec=4, per_phase=1, max_phase=8,
                                                      order=[1, 0]))
    acc_ready, acc_empty = _handoff_bars()
    bars = (ready, empty, acc_ready, acc_empty)
    w = (a_desc, b_desc, bias, y, a_bufs, b_bufs, acc_smem, bars, M, N, K, NPROG, GM, MODE)
    gl.warp_specialize([(_consumers, w), (_epilogue, w), (_producer, w)], [EPI_WARPS, 1],
                       [EPI_REGS, 40])


@gluon.jit
def _gelu_store(v, bias, y, rm, rn, N):
    """bias + erf GELU of an f32 block whose rows and columns are rm and rn, stored bf16."""
    v = v + gl.load(bias + rn).to(gl.float32)[None, :]
    out = 0.5 * v * _erfc(-(v * 0.7071067811865476))
    gl.store(y + rm[:, None] * N + rn[None, :], out.to(gl.bfloat16))


@gluon.jit
def _split_epilogue(a_desc, b_desc, bias, y, a_bufs, b_bufs, acc_smem, bars, M, N, K,
                    NPROG: gl.constexpr, GM: gl.constexpr, MODE: gl.constexpr):
    """EPI_WARPS warps: the three 64-column chunks of each tile's accumulator the consumers
    hand over (acc_smem, [3, BM, 64]), RB rows at a time in a dynamic loop (an unrolled
    one is tens of thousands of instructions that miss the instruction cache)."""
    ready, empty, acc_ready, acc_empty = bars
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    CW: gl.constexpr = acc_smem.type.shape[2]
    NC: gl.constexpr = acc_smem.type.shape[0]
    RB: gl.constexpr = 8 * gl.num_warps()
    blk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [gl.num_warps(), 1], [1, 0])
    SPC: gl.constexpr = BM // RB  # steps per chunk
    steps = acc_smem._reinterpret(gl.float32, [NC * SPC, RB, CW], acc_smem.layout)
    n_m = gl.cdiv(M, BM)
    n_n = gl.cdiv(N, BN)
    j = 0
    for t in range(gl.program_id(0), n_m * n_n, NPROG):
        pm, pn = _tile_mn(t, n_m, n_n, GM)
        mbarrier.wait(acc_ready, j & 1)
        for q in range(NC * SPC):
            v = steps.index(q).load(blk)
            if q == NC * SPC - 1:
                mbarrier.arrive(acc_empty)
            c = q // SPC
            # chunk c holds columns [c * CW, c * CW + CW) of the tile
            rn = pn * BN + c * CW + gl.arange(0, CW, layout=gl.SliceLayout(0, blk))
            rm = pm * BM + (q % SPC) * RB + gl.arange(0, RB, layout=gl.SliceLayout(1, blk))
            _gelu_store(v, bias, y, rm, rn, N)
        j += 1


@gluon.jit
def _split_consumers(a_desc, b_desc, bias, y, a_bufs, b_bufs, acc_smem, bars, M, N, K,
                     NPROG: gl.constexpr, GM: gl.constexpr):
    """The default partition, 8 warps: every tile's MMAs, then columns [0, 3 BN / 4) of
    the accumulator to the epilogue partition and the last quarter's epilogue here, so
    the epilogue warps keep up with the MMAs."""
    ready, empty, acc_ready, acc_empty = bars
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    n_m = gl.cdiv(M, BM)
    n_n = gl.cdiv(N, BN)
    it = 0
    j = 0
    for t in range(gl.program_id(0), n_m * n_n, NPROG):
        pm, pn = _tile_mn(t, n_m, n_n, GM)
        acc, it = _tile_mmas(a_bufs, b_bufs, ready, empty, it, K)
        c0, c1, c2, c3 = _quarters(acc)
        mbarrier.wait(acc_empty, (j & 1) ^ 1)
        acc_smem.index(0).store(c0)
        acc_smem.index(1).store(c1)
        acc_smem.index(2).store(c2)
        mbarrier.arrive(acc_ready)
        L: gl.constexpr = c3.type.layout
        rn = pn * BN + 3 * (BN // 4) + gl.arange(0, BN // 4, layout=gl.SliceLayout(0, L))
        rm = pm * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, L))
        _gelu_store(c3, bias, y, rm, rn, N)
        j += 1


@gluon.jit
def k_split(a_desc, b_desc, bias, y, M, N, K, NPROG: gl.constexpr, GM: gl.constexpr,
            STAGES: gl.constexpr, EPI_WARPS: gl.constexpr, EPI_REGS: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    a_bufs, b_bufs, ready, empty = _ring(a_desc, b_desc, STAGES)
    acc_smem = gl.allocate_shared_memory(
        gl.float32, [3, BM, BN // 4], gl.SwizzledSharedLayout(vec=4, per_phase=1,
                                                              max_phase=8, order=[1, 0]))
    acc_ready, acc_empty = _handoff_bars()
    bars = (ready, empty, acc_ready, acc_empty)
    c = (a_desc, b_desc, bias, y, a_bufs, b_bufs, acc_smem, bars, M, N, K, NPROG, GM)
    w = (a_desc, b_desc, bias, y, a_bufs, b_bufs, acc_smem, bars, M, N, K, NPROG, GM,
         gl.constexpr(0))
    gl.warp_specialize([(_split_consumers, c), (_split_epilogue, w), (_producer, w)],
                       [EPI_WARPS, 1], [EPI_REGS, 40])


@gluon.jit
def _reg_consumers(a_desc, b_desc, bias, y, a_bufs, b_bufs, bars, M, N, K,
                   NPROG: gl.constexpr, GM: gl.constexpr):
    """The default partition of k_reg, 8 warps: every tile's MMAs, then its epilogue from
    the accumulator's registers (by 64-column quarters) while the producer warp already
    loads the next tile's stages."""
    ready, empty, acc_ready, acc_empty = bars
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    n_m = gl.cdiv(M, BM)
    n_n = gl.cdiv(N, BN)
    it = 0
    for t in range(gl.program_id(0), n_m * n_n, NPROG):
        pm, pn = _tile_mn(t, n_m, n_n, GM)
        acc, it = _tile_mmas(a_bufs, b_bufs, ready, empty, it, K)
        c0, c1, c2, c3 = _quarters(acc)
        L: gl.constexpr = c0.type.layout
        rm = pm * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, L))
        rq = pn * BN + gl.arange(0, BN // 4, layout=gl.SliceLayout(0, L))
        _gelu_store(c0, bias, y, rm, rq, N)
        _gelu_store(c1, bias, y, rm, rq + BN // 4, N)
        _gelu_store(c2, bias, y, rm, rq + BN // 2, N)
        _gelu_store(c3, bias, y, rm, rq + 3 * (BN // 4), N)


@gluon.jit
def k_reg(a_desc, b_desc, bias, y, M, N, K, NPROG: gl.constexpr, GM: gl.constexpr,
          STAGES: gl.constexpr):
    """Persistent, a producer warp, the epilogue in the consumers' registers: no handoff
    through shared memory, the stage ring refilled during the epilogue."""
    a_bufs, b_bufs, ready, empty = _ring(a_desc, b_desc, STAGES)
    bars = (ready, empty, ready, empty)
    c = (a_desc, b_desc, bias, y, a_bufs, b_bufs, bars, M, N, K, NPROG, GM)
    w = (a_desc, b_desc, bias, y, a_bufs, b_bufs, a_bufs, bars, M, N, K, NPROG, GM,
         gl.constexpr(0))
    gl.warp_specialize([(_reg_consumers, c), (_producer, w)], [1], [40])


def layouts(BM: int, BN: int, BK: int):
    return (gl.NVMMASharedLayout.get_default_for([BM, BK], gl.bfloat16),
            gl.NVMMASharedLayout.get_default_for([BK, BN], gl.bfloat16))


# name: (BK, stages, epilogue warps, epilogue registers, mode); 128x256
# tiles, 8 consumer warps, maxnreg 168 (12 warps in all). Modes 1-4 are diagnostics: the
# handoff without the epilogue's work, the mainloop alone, bias only, a tanh GELU.
VARIANTS = {f"prod_k32s4_e2_r120_m{m}": (32, 4, 2, 120, m) for m in (0, 1, 2, 3, 4)}
# k_split: name: (stages, epilogue registers); BK 32, 2 epilogue warps
SPLIT = {"split_k32s5_e2_r120": (5, 120)}
# k_reg: name: (BK, stages)
REG = {"reg_k64s4": (64, 4), "reg_k64s3": (64, 3), "reg_k32s8": (32, 8)}


def _sig(BK: int, extra: tuple[str, ...]):
    """The AOT signature of a kernel here: descriptors for 128x256 tiles at BK, then the
    kernel's own constexprs after NPROG, GM and STAGES."""
    la, lb = layouts(128, 256, BK)
    return {"a_desc": f"tensordesc<bf16[128, {BK}],{la!r}>",
            "b_desc": f"tensordesc<bf16[{BK}, 256],{lb!r}>", "bias": "*bf16", "y": "*bf16",
            "M": "i32", "N": "i32", "K": "i32", "NPROG": "constexpr", "GM": "constexpr",
            "STAGES": "constexpr", **{k: "constexpr" for k in extra}}


def compile_only(nprog=132) -> None:
    """Compile every variant for sm_90 here (no GPU) and print its shared memory, spill
    stores and instruction counts from the SASS."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    cases = [(name, k_epi, BK, {"STAGES": st, "EPI_WARPS": ew, "EPI_REGS": er, "MODE": m})
             for name, (BK, st, ew, er, m) in VARIANTS.items()]
    cases += [(name, k_split, 32, {"STAGES": st, "EPI_WARPS": 2, "EPI_REGS": er})
              for name, (st, er) in SPLIT.items()]
    cases += [(name, k_reg, BK, {"STAGES": st}) for name, (BK, st) in REG.items()]
    for name, kernel, BK, consts in cases:
        sig = _sig(BK, tuple(k for k in consts if k != "STAGES"))
        src = GluonASTSource(kernel, sig, {"NPROG": nprog, "GM": 8, **consts})
        ck = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": 8, "maxnreg": 168})
        sass = disassemble(ck.asm["cubin"])
        print(f"{name}: shared", ck.metadata.shared, "spill stores", sass.count("STL"),
              "HGMMA", sass.count("HGMMA"), "MUFU", sass.count("MUFU"))


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
    ap.add_argument("--kernels", default="prod,split,reg",
                    help="comma-separated name prefixes of the kernels to time beside the "
                    "baselines")
    ap.add_argument("--db", default=ARCHIVE)
    args = ap.parse_args()
    if args.compile_only:
        compile_only()
        return
    import torch
    from h200_erf_store_stream import add_checked, interleaved
    from h200_erfc_libdevice import archived_best_gemm, kevolve_call
    from h200_triton_structures import recorder
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    rec = recorder(os.path.join(args.out, "gluon-epilogue.json"))
    M, K, N = 8192, 4096, 4096
    # the op's own inputs, and kevolve's archived best Triton kernel beside the Gluon ones
    src, be, case, (A, W, bias) = archived_best_gemm(args.db, rec)
    ref = torch.nn.functional.gelu(torch.addmm(bias.double(), A.double(), W.double()))
    f = torch.compile(lambda a, w, b: torch.nn.functional.gelu(torch.addmm(b, a, w)))
    f(A, W, bias)
    nsm = torch.cuda.get_device_properties(0).multi_processor_count
    runs = {"bare_mm": lambda: A @ W, "compile": lambda: f(A, W, bias),
            # cuBLASLt's fused bias + GELU epilogue (its GELU is the tanh approximation)
            "cublaslt_bias_gelu_tanh": lambda: torch._addmm_activation(bias, A, W,
                                                                       use_gelu=True),
            "kevolve_triton": kevolve_call(src, be, case, {"A": A, "W": W, "bias": bias},
                                           ref, rec, "kevolve_triton")}
    # Triton's own persistent descriptor mainloop (h200_gemm_mainloop.py, 0.98 of cuBLAS)
    from h200_gemm_mainloop import k_persist

    ym = torch.empty((M, N), device="cuda", dtype=torch.bfloat16)
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                 device="cuda"))
    runs["triton_persist_mainloop"] = lambda: k_persist[(nsm,)](
        A, W, ym, M, N, K, BM=128, BN=256, BK=64, GM=8, NSM=nsm, FLAT=False, WS=False,
        num_warps=8, num_stages=3)
    chosen = tuple(args.kernels.split(","))
    for name, (BK, stages, ew, er, mode) in VARIANTS.items():
        if not name.startswith(chosen):
            continue
        la, lb = layouts(128, 256, BK)
        ad = TensorDescriptor.from_tensor(A, [128, BK], la)
        wd = TensorDescriptor.from_tensor(W, [BK, 256], lb)
        y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        def call(ad=ad, wd=wd, y=y, stages=stages, ew=ew, er=er, mode=mode):
            k_epi[(nsm,)](ad, wd, bias, y, M, N, K, NPROG=nsm, GM=8, STAGES=stages,
                          EPI_WARPS=ew, EPI_REGS=er, MODE=mode, num_warps=8, maxnreg=168)
        # modes 1 and 2 write no output
        add_checked(runs, rec, name, call, y, ref if mode in (0, 3, 4) else None)
    la, lb = layouts(128, 256, 32)
    ad = TensorDescriptor.from_tensor(A, [128, 32], la)
    wd = TensorDescriptor.from_tensor(W, [32, 256], lb)
    for name, (stages, er) in SPLIT.items():
        if not name.startswith(chosen):
            continue
        y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        def call(y=y, stages=stages, er=er):
            k_split[(nsm,)](ad, wd, bias, y, M, N, K, NPROG=nsm, GM=8, STAGES=stages,
                            EPI_WARPS=2, EPI_REGS=er, num_warps=8, maxnreg=168)
        add_checked(runs, rec, name, call, y, ref)
    for name, (BK, stages) in REG.items():
        if not name.startswith(chosen):
            continue
        la, lb = layouts(128, 256, BK)
        ad = TensorDescriptor.from_tensor(A, [128, BK], la)
        wd = TensorDescriptor.from_tensor(W, [BK, 256], lb)
        y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        def call(y=y, ad=ad, wd=wd, stages=stages):
            k_reg[(nsm,)](ad, wd, bias, y, M, N, K, NPROG=nsm, GM=8, STAGES=stages,
                          num_warps=8, maxnreg=168)
        add_checked(runs, rec, name, call, y, ref)
    times = interleaved(runs, rec, args.rounds, "epi_")
    bare = times["bare_mm"]["ms"]
    rec("bare_over", {k: bare / v["ms"] for k, v in times.items()})


if __name__ == "__main__":
    main()
