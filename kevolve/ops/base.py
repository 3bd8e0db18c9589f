"""What every library operator carries: its IR, named shape presets with input generators,
and the torch eager code a user would write (the baseline to beat and a second oracle)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import UnknownName
from ..ir.nodes import Op, op_dims

PRESETS = ("small", "cpu", "gpu")


@dataclass(frozen=True)
class Case:
    """Concrete host inputs for one call: arrays by input name, plus integer params."""

    inputs: dict[str, np.ndarray]
    params: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class OpDef:
    name: str
    op: Op
    shapes: dict[str, dict]  # preset -> shape dict, e.g. {"M": 8192, "N": 8192}
    make: Callable[[dict, np.random.Generator], Case]
    torch_eager: Callable  # (dict[str, torch.Tensor], dict[str, int]) -> dict[str, Tensor]
    edge_shapes: tuple[dict, ...] = ()  # small shapes that stress edges (empty segments)
    doc: str = ""
    # dtype name -> Op, for ops whose shape dicts carry a "dtype" key (layernorm: f32, bf16).
    # Buffer dtypes are part of an Op, so each dtype is its own (cheap, import-time) Op.
    variants: dict[str, Op] = field(default_factory=dict)

    def op_for(self, shape: str | dict = "small") -> Op:
        """The IR for a preset or shape dict: the variant of its "dtype", else `op`."""
        sd = self.shape(shape)
        if not self.variants or "dtype" not in sd:
            return self.op
        try:
            return self.variants[sd["dtype"]]
        except KeyError:
            raise UnknownName(f"{self.name} has no {sd['dtype']!r} variant; dtypes: "
                           f"{', '.join(self.variants)}") from None

    def dims(self, shape: str | dict) -> dict[str, int]:
        """Dim values of a shape without making inputs (lowering needs only these). A jagged
        total no shape key names (T) is set to its bound B * max_len: plans depend on axis
        bounds, never on T, and the kernels read T from the real inputs at launch."""
        sd = self.shape(shape)
        out = {k: v for k, v in sd.items() if isinstance(v, int) and not isinstance(v, bool)}
        for name in op_dims(self.op_for(sd)):
            if name not in out:
                if name == "T" and "B" in out and "max_len" in out:
                    out[name] = out["B"] * out["max_len"]
                else:
                    raise UnknownName(f"{self.name}: shape {sd} does not give dim {name!r}")
        return out

    def case(self, shape: str | dict = "small", seed: int = 0) -> Case:
        """Fresh random inputs (never zeros) for a preset name or an explicit shape dict."""
        sd = self.shape(shape)
        return self.make(sd, np.random.default_rng(seed))

    def shape(self, shape: str | dict) -> dict:
        if isinstance(shape, dict):
            return dict(shape)
        if shape not in self.shapes:
            raise UnknownName(f"{self.name} has no shape preset {shape!r}; presets: "
                           f"{', '.join(self.shapes)}")
        return dict(self.shapes[shape])


def round_bf16(a: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bf16 (ties to even), kept in float32."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    bias = ((u >> 16) & 1) + np.uint32(0x7FFF)
    return ((u + bias) & np.uint32(0xFFFF0000)).view(np.float32)


def as_dtype(a: np.ndarray, dtype: str) -> np.ndarray:
    """Host array holding values of `dtype` (bf16: float32 rounded to bf16)."""
    x = np.asarray(a, dtype=np.float32)
    return round_bf16(x) if dtype == "bf16" else x.astype(np.float16) if dtype == "f16" else x


def randn(rng: np.random.Generator, shape, dtype: str = "f32", scale: float = 1.0
          ) -> np.ndarray:
    return as_dtype(rng.standard_normal(shape, dtype=np.float32) * scale, dtype)


def jagged_lengths(rng: np.random.Generator, b: int, max_len: int, mode: str = "uniform"
                   ) -> np.ndarray:
    """Segment lengths. uniform: in [0, max_len) with at least one empty segment when b > 1;
    all_empty; one_long: one segment of max_len, the rest empty; full: all max_len."""
    if mode == "uniform":
        lens = rng.integers(0, max(max_len, 1), size=b)
        if b > 1:
            lens[rng.integers(0, b)] = 0
    elif mode == "all_empty":
        lens = np.zeros(b, dtype=np.int64)
    elif mode == "one_long":
        lens = np.zeros(b, dtype=np.int64)
        lens[rng.integers(0, b)] = max_len
    elif mode == "full":
        lens = np.full(b, max_len)
    else:
        raise ValueError(f"unknown lengths mode {mode!r} (uniform, all_empty, one_long, full)")
    return lens.astype(np.int64)


def offsets_of(lengths: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def torch_inputs(op: Op, case: Case, device="cpu", float_dtype=None) -> dict:
    """Case inputs as torch tensors of the op's buffer dtypes (bf16 buffers become
    torch.bfloat16), or with every float input as `float_dtype` (float64 for oracles)."""
    import torch

    from ..ir.dtypes import torch_dtype

    out = {}
    for b in op.inputs:
        t = torch_dtype(b.dtype) if float_dtype is None or not b.dtype.is_float else float_dtype
        out[b.name] = torch.from_numpy(np.ascontiguousarray(case.inputs[b.name])).to(
            device=device, dtype=t)
    return out
