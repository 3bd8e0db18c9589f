"""The tensor IR: what an operator computes, never how."""

from .dtypes import DType, bf16, f16, f32, i32, i64
from .errors import InterpError, SpecError
from .nodes import Axis, AxisRef, Buffer, Compute, Const, Dim, Expr, Load, Op, Reduce
from .printer import op_text

__all__ = ["DType", "bf16", "f16", "f32", "i32", "i64", "InterpError", "SpecError", "Axis",
           "AxisRef", "Buffer", "Compute", "Const", "Dim", "Expr", "Load", "Op", "Reduce",
           "op_text"]
