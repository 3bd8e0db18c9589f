"""DLRM's dot interaction: all pairwise dot products of a sample's F feature vectors, kept
once each (strict lower triangle). A triangular axis (j < i) states that directly, so no
schedule wastes work on the upper half the way bmm + index does."""

from __future__ import annotations

from ..ir.builder import (
    axes,
    axis,
    compute,
    dims,
    f32,
    input,
    maximum,
    minimum,
    ne,
    op,
    reduce_axis,
    sum_,
    where,
)
from .base import OpDef


def dot_interaction_op():
    B, F, D = dims("B F D")
    X = input("X", (B, F, D), f32)
    b, i = axes("b i", B, F)
    j = axis("j", i, max_extent=F)
    d = reduce_axis("d", D)
    Z = compute("Z", (b, i, j), sum_(X[b, i, d] * X[b, j, d], over=d),
                shape=(B, F * (F - 1) // 2), store=(b, i * (i - 1) // 2 + j))
    return op("dot_interaction", inputs=[X], outputs=[Z])


def dot_interaction_backward_op():
    """d_X[b, i] = sum over j != i of d_Z[b, pair(i, j)] * X[b, j]: each pair's gradient is
    read by both its members (read-and-sum: no atomics), the triangle index made symmetric."""
    B, F, D = dims("B F D")
    X = input("X", (B, F, D), f32)
    dZ = input("d_Z", (B, F * (F - 1) // 2), f32)
    b, i, d = axes("b i d", B, F, D)
    j = reduce_axis("j", F)
    hi, lo = maximum(i, j), minimum(i, j)
    dX = compute("d_X", (b, i, d),
                 sum_(where(ne(i, j), dZ[b, hi * (hi - 1) // 2 + lo] * X[b, j, d], 0.0),
                      over=j))
    return op("dot_interaction_backward", inputs=[X, dZ], outputs=[dX])


def _torch(t, p):
    import torch

    X = t["X"]
    F = X.shape[1]
    Z = torch.bmm(X, X.transpose(1, 2))
    li, lj = torch.tril_indices(F, F, offset=-1, device=X.device)
    return {"Z": Z[:, li, lj]}


DOT_INTERACTION = OpDef(
    "dot_interaction", dot_interaction_op(),
    shapes={"small": {"B": 4, "F": 6, "D": 5}, "cpu": {"B": 4096, "F": 27, "D": 64},
            "gpu": {"B": 16384, "F": 27, "D": 128}},
    torch_eager=_torch,
    edge_shapes=({"B": 1, "F": 2, "D": 1}, {"B": 3, "F": 1, "D": 4},
                 {"B": 2, "F": 27, "D": 3}),
    doc="Z[b, i*(i-1)/2 + j] = X[b, i] . X[b, j] for j < i < F",
    backward=dot_interaction_backward_op(),
)
