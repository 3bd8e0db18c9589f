"""KernelPlan: the scheduled op, lowered to kernels that every backend renders.

A plan keeps tile-level structure: per kernel, the loops of its root stage (grid programs,
sequential loops, blocks with a layout position), and the steps computed inside each
program (producers computed at the root, then the root). Triton renders blocks as
`tl.arange` tensors; C-like backends render them as loops."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.nodes import Axis, Compute, Expr, Op
from ..ir.prefix import Prefix


@dataclass(frozen=True)
class PLoop:
    name: str
    origin: tuple[str, ...]  # IR axis (two for a fused grid loop)
    role: str  # grid | seq | block
    size: int | None = None  # block size (power of two) / inner tile size
    pos: int | None = None  # layout position of a block
    tail: str = "mask"
    vector: int | None = None
    unroll: int | None = None
    bind: str | None = None  # threads (C-family GPUs) on a block


@dataclass(frozen=True)
class AxisMap:
    """How one IR axis' value is formed from loops: start + sum(loop * stride)."""

    axis: Axis
    loops: tuple[str, ...]  # outer..inner loop names
    strides: tuple[int, ...]  # multipliers of each loop (inner tile sizes)
    fused: tuple[str, int] | None = None  # (fused loop, position 0|1) for fused grid axes
    masked: bool = True  # needs local < extent


@dataclass(frozen=True)
class Step:
    """One stage computed inside a kernel's program, after loop `level` (None: at top)."""

    stage: Compute
    body: Expr  # inlined producers substituted
    level: str | None
    spatial: tuple[AxisMap, ...]  # the stage's spatial axes (mapped onto the root's loops)
    reduce_loops: tuple[PLoop, ...]  # the stage's own loops over its reduce axes
    reduce: tuple[AxisMap, ...]
    strategy: str  # single | looped | online | dot | scan | none
    online_max: str | None = None  # for online: the max stage folded into this sum
    is_root: bool = False
    prefetch: tuple[tuple[str, int], ...] = ()  # (buffer, distance): gathers to fetch ahead
    caches: tuple[tuple[str, str, str], ...] = ()  # (buffer, scope, copy) from cache moves
    store_parts: int = 1  # pieces of a bulk write of the output (its own cache's parts)
    scan: Prefix | None = None  # scan: the prefix reduction and the axis it walks
    store_out: bool = False  # computed at the root and also written to its own output


@dataclass(frozen=True)
class KernelPlan:
    name: str
    root: Compute
    loops: tuple[PLoop, ...]
    steps: tuple[Step, ...]
    rank: int  # number of block layout positions
    pos_sizes: tuple[int, ...]  # block size of the root at each position (1 if none)
    num_warps: int | None = None
    num_stages: int | None = None
    group_m: int | None = None
    guards: tuple[tuple[Expr, str], ...] = ()  # (condition over dims, message)
    dot_precision: str | None = None  # f32 matrix-unit products: ieee | tf32x3
    constexpr_dims: tuple[str, ...] = ()  # dims compiled in (Triton constexpr)
    persistent: int | None = None  # programs per multiprocessor looping over the grid
    pipeline: str | None = None  # across_tiles: a persistent loop pipelined across tiles

    @property
    def grid(self) -> tuple[PLoop, ...]:
        return tuple(lp for lp in self.loops if lp.role == "grid")

    @property
    def writes(self) -> tuple[str, ...]:
        """The buffers this kernel writes: the root's, then every output computed in it."""
        return tuple(st.stage.out.name for st in self.steps if st.is_root or st.store_out)


@dataclass(frozen=True)
class Plan:
    op: Op
    kernels: tuple[KernelPlan, ...]
    scratch: tuple[str, ...]  # intermediate stages materialized in global memory
    dims: tuple[tuple[str, int], ...] = field(default=())  # the shape class lowered for

    @property
    def dims_dict(self) -> dict[str, int]:
        return dict(self.dims)
