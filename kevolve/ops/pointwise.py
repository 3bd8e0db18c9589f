"""Elementwise ops: pure bandwidth, the simplest test of a backend's vector loads."""

from __future__ import annotations

from ..ir.builder import axes, cast, compute, dims, f32, input, op, sigmoid
from .base import OpDef

POINTWISE_DTYPES = ("f32", "bf16", "f16")


def swish_add_op(dtype: str = "f32"):
    """out = x * sigmoid(x) + y, computed in f32 and stored in the inputs' dtype."""
    n = dims("n")
    x = input("x", (n,), dtype)
    y = input("y", (n,), dtype)
    (i,) = axes("i", n)
    xf = cast(x[i], f32)
    out = compute("out", (i,), xf * sigmoid(xf) + cast(y[i], f32), dtype=dtype)
    return op("swish_add", inputs=[x, y], outputs=[out])


def _torch(t, p):
    import torch.nn.functional as F

    return {"out": F.silu(t["x"]) + t["y"]}


_VARIANTS = {d: swish_add_op(d) for d in POINTWISE_DTYPES}
SWISH_ADD = OpDef(
    "swish_add", _VARIANTS["f32"],
    shapes={"small": {"n": 300, "dtype": "f32"}, "cpu": {"n": 4 * 2**20, "dtype": "f32"},
            "gpu": {"n": 64 * 2**20, "dtype": "bf16"}},
    torch_eager=_torch,
    edge_shapes=({"n": 1, "dtype": "f32"}, {"n": 1027, "dtype": "f32"},
                 {"n": 77, "dtype": "bf16"}),
    doc="out = x * sigmoid(x) + y over n elements, math in f32, out in the inputs' dtype",
    variants=_VARIANTS,
)
