"""Triton's dots, estimated: what a contraction's pipelined operand tiles take of shared
memory and its accumulator of registers, per program (`TritonBackend.usage`), before any
compile; held against the device by backends/usage.py's `check_fits`."""

from __future__ import annotations

from ...ir.nodes import Load, product_factors
from ...plan.model import KernelPlan, Plan, Step
from ..usage import Usage
from .bulk import copied_in_bulk, staging_bytes


def _operands(st: Step) -> tuple[Load, Load] | None:
    ab = product_factors(st.body)
    return ab if ab and all(isinstance(x, Load) for x in ab) else None


def dot_usage(plan: Plan, stages: int = 3, warps: int = 4, wavefront: int = 32
              ) -> tuple[Usage, ...]:
    """Two-dimensional contractions of two different 16-bit inputs, as Triton lowers them
    on NVIDIA GPUs: each of `stages` shared-memory buffers holds an [M, K] and a [K, N]
    operand tile (one buffer fewer under 4 warps or 64 rows, where no warpgroup MMA is
    used), and the [M, N] f32 accumulator is spread over the program's threads. `stages`
    and `warps` are the backend's defaults where the plan sets none.

    Of the 334 results of gemm_bias_gelu kernels the H200 compiled (294 candidates, some
    measured twice), the estimate is never over the limit and equals ptxas's figure for
    all but those with 16-wide K tiles (a third more there); of the 15 Triton refused, it
    is at least what Triton asked for in all but two persistent 32-warp programs with K
    compiled in (64 KiB more) (benchmarks/results/h200-archive.db). Other contractions get
    no estimate: f32 and mixed operands, a Gram matrix's single operand (dot_interaction)
    and batched dots are staged differently (a quarter to a third of this count there),
    and an estimate that is too high would skip good candidates. Operands copied in bulk
    (TMA, triton/bulk.py) add one 8-byte barrier per buffer: ptxas's figure for all 5 such
    kernels the H200 compiled (3 and 4 stages, one or both operands). An output written in
    bulk adds its staging buffer (one piece of the tile): ptxas's figure at 128x256 tiles
    in 2 pieces, 3 and 4 stages. Not counted: the epilogue buffer Triton adds when a
    persistent loop is pipelined across tiles (32 KiB at 128x256 with pointer stores, 1 KiB
    beside a bulk write, on the H200)."""
    out = []
    for k in plan.kernels:
        for st in k.steps:
            ab = _operands(st) if st.strategy == "dot" and k.rank == 2 else None
            if ab is None or ab[0].buffer is ab[1].buffer or \
                    {x.buffer.dtype.bits for x in ab} != {16}:
                continue
            m, n, kb = _dot_tile(k, st)
            w = k.num_warps or warps
            s = k.num_stages or stages
            bufs = max(1, s if w >= 4 and m >= 64 else s - 1)
            tma = any(copied_in_bulk(plan, st, x) for x in ab)
            out.append(Usage(k.name, st.stage.name, (m, n, kb), s,
                             bufs * ((m * kb + kb * n) * 2 + (8 if tma else 0)) +
                             staging_bytes(plan, k), -(-m * n // (w * wavefront)),
                             w * wavefront))
    return tuple(out)


def _dot_tile(k: KernelPlan, st: Step) -> tuple[int, int, int]:
    sizes: dict[int, int] = {}
    for lp in k.loops + st.reduce_loops:
        if lp.role == "block" and lp.pos is not None:
            sizes[lp.pos] = max(sizes.get(lp.pos, 1), lp.size or 1)
    kb = max((lp.size or 1) for lp in st.reduce_loops if lp.role == "block")
    return sizes.get(0, 1), sizes.get(1, 1), kb
