"""What one program of a plan's kernels will ask of a multiprocessor, estimated before any
compile, and held against the device's limits (the device-neutral half: each backend
estimates its own kernels through `Backend.usage`, e.g. triton/usage.py).

Why: a kernel whose operand tiles exceed the shared memory a program may have cannot
compile, and one whose accumulator exceeds the registers spills (on the H200, 2-warp gemm
programs on 128x128 tiles ran 75-110 times slower than the best); both follow from the
tile sizes, stages and warps alone, so a search can skip such a candidate before any
worker builds it. These are estimates that proposers use, not a legality layer: a trace
given by hand still goes to the compiler, whose word is final.
"""

from __future__ import annotations

from dataclasses import dataclass

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
