"""Element types. bf16 has no numpy type: host arrays of bf16 buffers are float32 holding
bf16-representable values, and backends convert at the boundary."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    bits: int
    kind: str  # "float" | "int" | "bool"

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def np(self) -> np.dtype:
        """The numpy type that holds values of this dtype on the host."""
        return np.dtype(_HOST[self.name])

    def __str__(self) -> str:
        return self.name


f32 = DType("f32", 32, "float")
f16 = DType("f16", 16, "float")
bf16 = DType("bf16", 16, "float")
f64 = DType("f64", 64, "float")
i32 = DType("i32", 32, "int")
i64 = DType("i64", 64, "int")
i8 = DType("i8", 8, "int")
bool_ = DType("bool", 8, "bool")

_HOST = {"f32": "float32", "f16": "float16", "bf16": "float32", "f64": "float64",
         "i32": "int32", "i64": "int64", "i8": "int8", "bool": "bool"}
BY_NAME = {d.name: d for d in (f32, f16, bf16, f64, i32, i64, i8, bool_)}
BUFFER_DTYPES = ("f32", "f16", "bf16", "i32", "i64", "i8", "bool")


def parse(name: str | DType) -> DType:
    if isinstance(name, DType):
        return name
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; use one of {', '.join(BUFFER_DTYPES)}") from None


def promote(a: DType, b: DType) -> DType:
    """Result type of a binary op whose operands are already compatible."""
    if a == b:
        return a
    if a.is_float and b.is_float:
        return a if a.bits >= b.bits else b
    if a.is_float:
        return a
    if b.is_float:
        return b
    return a if a.bits >= b.bits else b


# The torch dtype of each buffer dtype, by its name in torch (bf16 is torch.bfloat16 on the
# device, unlike the host's float32): the one table, read without importing torch.
TORCH_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64",
               "i32": "int32", "i64": "int64", "i8": "int8", "bool": "bool"}


def torch_dtype(name: str | DType):
    """The torch dtype of a kevolve dtype (torch is imported here, on first use)."""
    import torch

    return getattr(torch, TORCH_NAMES[parse(name).name])
