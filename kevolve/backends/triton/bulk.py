"""Bulk copies on the Triton backend: `cache ... scope: shared, copy: bulk` on a contraction
operand loads its tile through a tensor descriptor the launcher makes on the host
(`TensorDescriptor.from_tensor`), which Triton lowers to the Hopper copy engine (TMA): the
engine computes the addresses and writes the tile into shared memory, where pointer tiles
cost every thread a cp.async per 16 bytes and the address arithmetic for it. On the H200,
gemm_bias_gelu's 128x256x64 kernel issued 64.2M warp instructions per call with TMA loads
against 81.2M with pointer loads (benchmarks/results/h200-gemm-counters*).

A tile can go through a descriptor when the descriptor's bounds are the load's masks: the
operand is a 2-d row-major buffer read at `[a, b]` for two axes that start at 0 and run
over the buffer's extents, each formed as `outer * size + lane` from one block loop of at
most 256 lanes (the engine's box) and loops outside it; the copy engine fills rows and
columns past the buffer's end with zeros, as the masked load would. What does not fit that
is a structural error (`problem`); rows that are not a multiple of 16 bytes at the shape
class (the engine's stride alignment) fall back to pointer tiles for that shape class
(`misaligned`), and the launcher guards the same condition for shapes it was not lowered
for.

A stage's own output can be written the same way (`cache y ... copy: bulk` on stage y):
the program stores its tile into a shared-memory staging buffer and the engine writes it,
clipping rows and columns past the buffer's end as the masked store would; `parts` pieces
along the last axis shrink the staging buffer, so that it fits beside the pipeline's.
On the H200 that took gemm_bias_gelu's 128x256 kernel from 0.926-0.928 to 0.938-0.942 of
cuBLAS's bare matmul, sustained, with its loop pipelined across tiles
(h200-gemm-kdepth-loops.json).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import CandidateError
from ...ir.interp import eval_int
from ...ir.nodes import AxisRef, Buffer, Const, Load, product_factors
from ...plan.model import AxisMap, KernelPlan, Plan, Step

MAX_BOX = 256  # lanes per dimension of one copy-engine box
MIN_ROW_BYTES = 16  # the box's innermost dimension, and the buffer's row stride, in bytes


DROP = "drop `copy: bulk` from its cache move (its threads copy it then)"


class BulkError(CandidateError, ValueError):
    """A bulk copy the Triton backend cannot render: why, and what to do instead."""

    def __init__(self, why: str, hint: str = DROP):
        super().__init__(why)
        self.hint = hint


@dataclass(frozen=True)
class BulkTile:
    buffer: str
    block: tuple[int, int]  # lanes along the buffer's two dimensions (memory order)
    maps: tuple[AxisMap, AxisMap]  # how each index axis is formed from the kernel's loops

    @property
    def arg(self) -> str:
        """The kernel parameter that carries the descriptor."""
        return f"t_{self.buffer}_{self.block[0]}x{self.block[1]}"


def wants_bulk(st: Step, buffer: str) -> bool:
    return (buffer, "shared", "bulk") in st.caches


def writes_in_bulk(st: Step) -> bool:
    """Whether the step asked for its own output to be written by the copy engine."""
    return wants_bulk(st, st.stage.out.name)


def written_in_bulk(plan: Plan, st: Step) -> bool:
    """Whether the rendered kernel writes step `st`'s output through descriptors."""
    return writes_in_bulk(st) and misaligned(plan, st.stage.out) is None


def copied_in_bulk(plan: Plan, st: Step, ld: Load) -> bool:
    """Whether the rendered kernel reads operand `ld` through a descriptor."""
    return wants_bulk(st, ld.buffer.name) and misaligned(plan, ld.buffer) is None


def _loops(k: KernelPlan, st: Step) -> dict:
    return {lp.name: lp for lp in k.loops + st.reduce_loops}


def tile(k: KernelPlan, st: Step, ld: Load) -> BulkTile:
    """The descriptor tile of contraction operand `ld` in step `st`, or BulkError."""
    name = ld.buffer.name
    if k.rank != 2:
        raise BulkError(f"{name!r} is an operand of a batched contraction (a rank-{k.rank} "
                        "tile); bulk copies take 2-d contractions")
    if len(ld.buffer.shape) != 2 or len(ld.index) != 2:
        raise BulkError(f"{name!r} is not a 2-d buffer read at [row, column]")
    return _tile(k, st, name, ld.index, ld.buffer.shape)


def output_tile(k: KernelPlan, st: Step) -> BulkTile:
    """The descriptor tile of one of the `parts` pieces of step `st`'s output, or
    BulkError."""
    out = st.stage.out
    name = out.name
    if not st.is_root:
        raise BulkError(f"stage {st.stage.name!r} is computed inside kernel {k.name!r}, so "
                        f"{name!r} stays in the program and is not written")
    if k.rank != 2 or len(out.shape) != 2 or len(st.stage.store_index) != 2:
        raise BulkError(f"{name!r} is not a 2-d tile written at [row, column] (a rank-"
                        f"{k.rank} tile)")
    bt = _tile(k, st, name, st.stage.store_index, out.shape)
    rows, cols = bt.block
    p = st.store_parts
    if cols % p or (cols // p) * out.dtype.bits // 8 < MIN_ROW_BYTES:
        raise BulkError(f"{name!r}'s tile has {cols} lanes along its last axis: {p} parts of "
                        f"it are not whole pieces of {MIN_ROW_BYTES} bytes or more",
                        f"use fewer parts, or {DROP}")
    return BulkTile(name, (rows, cols // p), bt.maps)


def staging_bytes(plan: Plan, k: KernelPlan) -> int:
    """Shared memory for the staging buffer of kernel `k`'s bulk write (one piece of the
    output tile), or 0 when it writes with its threads."""
    st = k.steps[-1]
    if not written_in_bulk(plan, st):
        return 0
    try:  # usage() may see a plan the backend's check has not ruled on
        rows, cols = output_tile(k, st).block
    except BulkError:
        return 0
    return rows * cols * st.stage.out.dtype.bits // 8


def _tile(k: KernelPlan, st: Step, name: str, index, shape) -> BulkTile:
    loops = _loops(k, st)
    maps, block = [], []
    for pos, (e, extent) in enumerate(zip(index, shape)):
        if not isinstance(e, AxisRef):
            raise BulkError(f"{name!r} is indexed at {pos} by an expression, not an axis: a "
                            "descriptor moves whole tiles at axis offsets")
        a = e.axis
        m = next((m for m in st.spatial + st.reduce if m.axis == a), None)
        if m is None or m.fused:
            raise BulkError(f"axis {a.name!r} of {name!r} is not a tiled loop of the step")
        if a.is_jagged or a.start != Const(0) or a.extent != extent:
            raise BulkError(f"axis {a.name!r} does not run over {name!r}'s extent at index "
                            f"{pos} from 0, so the buffer's bounds are not the load's masks")
        blocks = [(ln, s) for ln, s in zip(m.loops, m.strides) if loops[ln].role == "block"]
        if len(blocks) != 1 or blocks[0][1] != 1:
            raise BulkError(f"axis {a.name!r} is not one tile of lanes inside outer loops")
        size = loops[blocks[0][0]].size
        if size > MAX_BOX:
            raise BulkError(f"{name!r}'s tile has {size} lanes along axis {a.name!r}, over the "
                            f"copy engine's {MAX_BOX}", f"split {a.name!r} into tiles of at "
                            f"most {MAX_BOX}, or {DROP}")
        maps.append(m)
        block.append(size)
    # A tl.dot's tiles have 16 lanes or more per axis, so a box row holds 16 bytes or more
    return BulkTile(name, (block[0], block[1]), (maps[0], maps[1]))


def origin(k: KernelPlan, st: Step, bt: BulkTile, var: dict[str, str]) -> list[str]:
    """The tile's first element, per dimension: the axis less its lanes (`var` names the
    loop variables of the rendered code)."""
    loops = _loops(k, st)
    return [" + ".join(var[ln] if s == 1 else f"{var[ln]} * {s}" for ln, s in
                       zip(m.loops, m.strides) if loops[ln].role != "block") or "0"
            for m in bt.maps]


def misaligned(plan: Plan, buf: Buffer) -> str | None:
    """Why the shape class rules a descriptor of `buf` out (rows not a multiple of 16
    bytes, an empty buffer), or None when it does not (or its dims are not fixed)."""
    dims = plan.dims_dict
    try:
        rows, cols = (eval_int(e, dims) for e in buf.shape)
    except (KeyError, ValueError, TypeError):
        return None
    nbytes = cols * buf.dtype.bits // 8
    if nbytes % MIN_ROW_BYTES:
        return f"its rows are {nbytes} bytes at this shape class, not a multiple of 16"
    if rows == 0 or cols == 0:
        return "it is empty at this shape class"
    return None


def problems(plan: Plan):
    """(kernel, stage, buffer, why, hint) for every bulk copy the backend cannot render."""
    for k in plan.kernels:
        for st in k.steps:
            for buf, _scope, copy in st.caches:
                if copy != "bulk":
                    continue
                if buf == st.stage.out.name:
                    try:
                        output_tile(k, st)
                    except BulkError as e:
                        yield k.name, st.stage.name, buf, str(e), e.hint
                    continue
                ld = next((x for x in product_factors(st.body) or () if isinstance(x, Load)
                           and x.buffer.name == buf), None)
                if ld is None:
                    yield k.name, st.stage.name, buf, (
                        f"stage {st.stage.name!r} is not a contraction with {buf!r} as an "
                        "operand; Triton copies only the operands of a tl.dot in bulk"), DROP
                    continue
                if st.strategy != "dot":
                    yield k.name, st.stage.name, buf, (
                        f"this plan does not lower stage {st.stage.name!r} to a tl.dot (that "
                        "needs tiles of at least 16 lanes along its rows, its columns and "
                        "the reduce axis)"), f"tile the contraction so, or {DROP}"
                    continue
                try:
                    tile(k, st, ld)
                except BulkError as e:
                    yield k.name, st.stage.name, buf, str(e), e.hint
