"""What one program of a plan's kernels will ask of a multiprocessor, estimated before any
compile, and held against the device's limits.

Why: in one H200 search, 12 of the heuristic proposer's 34 evaluated gemm_bias_gelu
candidates were kernels that could not compile (dot operand tiles over the 227 KiB of
shared memory a program may have, or over the tile limit) or spilled their accumulator
(2-warp programs on 128x128 tiles and larger, 30-44 ms against 0.4). Both follow from the
tile sizes, stages and warps alone. These are estimates that proposers use to skip a
candidate, not a legality layer: a trace given by hand still goes to the compiler, whose
word is final.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.nodes import Load, product_factors
from ..plan.model import KernelPlan, Plan, Step
from ..schedule.errors import MoveError


@dataclass(frozen=True)
class Usage:
    """One contraction step's estimated needs, per program."""

    kernel: str
    stage: str
    tile: tuple[int, int, int]  # (M, N, K) of the dot
    stages: int  # pipeline stages of its operand loads
    shared_bytes: int  # every stage's operand tiles, held in shared memory at once
    registers: int  # 32-bit registers per thread for the f32 accumulator alone
    threads: int = 0  # threads of one program (warps x wavefront), who share its registers


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
    compiled in (64 KiB more). Other contractions get
    no estimate: f32 and mixed operands, a Gram matrix's single operand (dot_interaction)
    and batched dots are staged differently (a quarter to a third of this count there),
    and an estimate that is too high would skip good candidates. Operands copied in bulk
    (TMA, triton/bulk.py) add one 8-byte barrier per buffer: ptxas's figure for all 5 such
    kernels the H200 compiled (3 and 4 stages, one or both operands). An output written in
    bulk adds its staging buffer (one piece of the tile): ptxas's figure at 128x256 tiles
    in 2 pieces, 3 and 4 stages. Not counted: the epilogue buffer Triton adds when a
    persistent loop is pipelined across tiles (32 KiB at 128x256 with pointer stores, 1 KiB
    beside a bulk write, on the H200)."""
    from .triton.bulk import copied_in_bulk, staging_bytes  # that package imports this

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


def check_fits(usage: tuple[Usage, ...], limits: dict) -> None:
    """Raise MoveError (code `resources.*`) for the first estimate over `limits`:
    `shared_bytes` (per program), `registers_per_thread` and `registers_per_program` (the
    register file a program's threads share); an absent limit is not held.

    The last is the one a many-warp program meets: in the committed H200 gemm archives,
    every kernel whose accumulator alone needed all of each thread's share of the 65536
    registers (256x256 and 128x512 tiles at 16 or 32 warps: 45 results) failed in ptxas
    ("Insufficient registers", 44) or spilled (1), and none under its share failed so."""
    smem, regs = limits.get("shared_bytes"), limits.get("registers_per_thread")
    file = limits.get("registers_per_program")
    for u in usage:
        tile = "x".join(map(str, u.tile))
        if smem and u.shared_bytes > smem:
            raise MoveError(None, "resources.shared_memory",
                            f"{u.kernel}: step {u.stage!r} pipelines {u.stages} stages of "
                            f"{tile} dot operand tiles, {u.shared_bytes} bytes of shared "
                            f"memory, over the device's {smem} per program",
                            "lower num_stages or split the tile smaller")
        if regs and u.registers > regs:
            raise MoveError(None, "resources.registers",
                            f"{u.kernel}: step {u.stage!r} keeps a {tile} f32 accumulator in"
                            f" {u.registers} registers per thread, over the device's {regs} "
                            "(it would spill to local memory)",
                            "raise num_warps or split the tile smaller")
        if file and u.threads and u.registers >= file // u.threads:
            raise MoveError(None, "resources.registers",
                            f"{u.kernel}: step {u.stage!r} keeps a {tile} f32 accumulator in"
                            f" {u.registers} registers per thread, all of each thread's "
                            f"share of the {file} its {u.threads} threads have (ptxas "
                            "stops with 'Insufficient registers')",
                            "lower num_warps (each thread then gets more) or split the tile "
                            "smaller")


def resident_programs(usage: tuple[Usage, ...], limits: dict) -> int | None:
    """How many programs of these estimates one multiprocessor holds at once by shared
    memory (`limits["shared_bytes"]`, the most a program may have, is on NVIDIA GPUs the
    multiprocessor's less 1 KiB); None when either is unknown. Persistent programs past
    this count do not run beside the others: they wait for whole programs to finish."""
    smem = limits.get("shared_bytes")
    need = max((u.shared_bytes for u in usage), default=0)
    return max(1, smem // need) if smem and need else None
