"""Embedding bags (FBGEMM/torch format): out[b] = reduce of table rows indices[offsets[b]:
offsets[b+1]]. The row index is itself a load, so the op is a gather feeding a jagged
reduction; the table is never read whole, which is what makes it bandwidth-interesting."""

from __future__ import annotations

from ..ir.builder import (
    axes,
    cast,
    compute,
    dims,
    f32,
    i64,
    input,
    jagged_axis,
    maximum,
    op,
    param,
    sum_,
)
from .base import OpDef


def embedding_bag_op(mode: str = "sum"):
    """mode "sum" or "mean"; the mean of an empty bag is 0 (as in torch and FBGEMM)."""
    V, D, T, B = dims("V D T B")
    table = input("table", (V, D), f32)
    indices = input("indices", (T,), i64)
    offsets = input("offsets", (B + 1,), i64)
    b, d = axes("b d", B, D)
    l = jagged_axis("l", start=offsets[b], end=offsets[b + 1], max_extent=param("max_len"),
                    reduce=True)
    pooled = sum_(table[indices[l], d], over=l)
    if mode == "mean":
        pooled = pooled / cast(maximum(offsets[b + 1] - offsets[b], 1), f32)
    out = compute("out", (b, d), pooled)
    name = "embedding_bag" if mode == "sum" else f"embedding_bag_{mode}"
    return op(name, inputs=[table, indices, offsets], outputs=[out])


def _torch(mode: str):
    def eager(t, p):
        import torch.nn.functional as F

        return {"out": F.embedding_bag(t["indices"], t["table"], t["offsets"], mode=mode,
                                       include_last_offset=True)}
    return eager


_SHAPES = {
    "small": {"V": 30, "D": 8, "B": 9, "max_len": 7, "lengths": "uniform"},
    "cpu": {"V": 2**20, "D": 64, "B": 16384, "max_len": 20, "lengths": "full"},
    "gpu": {"V": 4 * 2**20, "D": 128, "B": 65536, "max_len": 32, "lengths": "full"},
}
_EDGES = (
    {"V": 10, "D": 4, "B": 6, "max_len": 4, "lengths": "all_empty"},
    {"V": 30, "D": 4, "B": 7, "max_len": 25, "lengths": "one_long"},
    {"V": 5, "D": 3, "B": 4, "max_len": 9, "lengths": "full"},  # odd row width
    {"V": 12, "D": 8, "B": 1, "max_len": 6, "lengths": "uniform"},
)

EMBEDDING_BAG = OpDef(
    "embedding_bag", embedding_bag_op("sum"), shapes=_SHAPES,
    torch_eager=_torch("sum"), edge_shapes=_EDGES,
    doc="out[b, d] = sum of table[indices[l], d] for l in offsets[b]..offsets[b+1]",
)

EMBEDDING_BAG_MEAN = OpDef(
    "embedding_bag_mean", embedding_bag_op("mean"), shapes=_SHAPES,
    torch_eager=_torch("mean"), edge_shapes=_EDGES,
    doc="out[b, d] = mean of table[indices[l], d] over bag b (0 for an empty bag)",
)
