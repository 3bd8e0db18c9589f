"""What every operator carries: its IR, named shape presets, the declarations its inputs need
beyond the IR, and optionally the torch code a user would write (the baseline to beat and a
second oracle)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..errors import UnknownName
from ..ir.nodes import Op, op_dims
from .inputs import as_dtype, jagged_lengths, offsets_of, round_bf16  # noqa: F401

PRESETS = ("small", "cpu", "gpu")


@dataclass(frozen=True)
class Case:
    """Concrete host inputs for one call: arrays by input name, plus integer params."""

    inputs: dict[str, np.ndarray]
    params: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class OpDef:
    """An operator as every command takes it: its IR, shape presets, what the IR cannot say
    about valid inputs (`inputs`: Lengths / Domain per input), and optionally its PyTorch
    reference. Library ops and users' specs (kevolve.ops.spec.define) are the same type."""

    name: str
    op: Op
    shapes: dict[str, dict]  # preset -> shape dict, e.g. {"M": 8192, "N": 8192}
    # (dict[str, torch.Tensor], dict[str, int]) -> dict[str, Tensor]; None: no reference
    torch_eager: Callable | None = None
    edge_shapes: tuple[dict, ...] = ()  # small shapes that stress edges (empty segments)
    doc: str = ""
    # dtype name -> Op, for ops whose shape dicts carry a "dtype" key (layernorm: f32, bf16).
    # Buffer dtypes are part of an Op, so each dtype is its own (cheap, import-time) Op.
    variants: dict[str, Op] = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)  # input name -> Lengths | Domain
    reference: object = None  # as the spec gave it: a callable or an ATen/torch name
    backward: object = None  # a hand-written backward spec (Op or OpDef), stored as given
    ref: str = ""  # how kevolve.ops.resolve finds it again (name, spec path, entry point)

    @property
    def has_reference(self) -> bool:
        return self.torch_eager is not None

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

    def analysis(self, shape: str | dict = "small"):
        """What the IR (and this op's declarations) say about valid inputs."""
        return _analysis(self.op_for(shape), tuple(sorted(self.inputs.items())))

    def dims(self, shape: str | dict) -> dict[str, int]:
        """Dim values of a shape without making inputs (lowering needs only these). A jagged
        total no shape key names (T) is set to its bound: segments x max_len (B * max_len):
        plans depend on axis bounds, never on T, and kernels read T from the inputs."""
        sd = self.shape(shape)
        op = self.op_for(sd)
        out = {k: v for k, v in sd.items() if isinstance(v, int) and not isinstance(v, bool)}
        an = self.analysis(sd)
        for name in op_dims(op):
            if name in out:
                continue
            off = an.totals.get(name)
            if off is not None:
                out[name] = _total_bound(op, an, off, out)
            if name not in out:
                raise UnknownName(f"{self.name}: shape {sd} does not give dim {name!r}")
        return out

    def case(self, shape: str | dict = "small", seed: int = 0) -> Case:
        """Fresh random inputs (never zeros) for a preset name or an explicit shape dict,
        derived from the IR and the op's input declarations (kevolve.ops.inputs), for a
        library op and a user's spec alike."""
        sd = self.shape(shape)
        rng = np.random.default_rng(seed)
        from .inputs import derive
        ins, params = derive(self.op_for(sd), sd, rng, self.analysis(sd))
        return Case(ins, params)

    def shape(self, shape: str | dict) -> dict:
        if isinstance(shape, dict):
            return dict(shape)
        if shape not in self.shapes:
            raise UnknownName(f"{self.name} has no shape preset {shape!r}; presets: "
                           f"{', '.join(self.shapes)}")
        return dict(self.shapes[shape])


@lru_cache(maxsize=256)
def _analysis(op: Op, declared: tuple):
    from .inputs import analyse
    return analyse(op, dict(declared))


def _total_bound(op: Op, an, off: str, env: dict) -> int | None:
    """segments x the longest segment: the most rows an offsets input can count."""
    from ..ir.interp import eval_int
    from ..ir.nodes import Dim, walk

    b = next(x for x in op.inputs if x.name == off)
    known = lambda e: all(n.name in env for n in walk(e) if isinstance(n, Dim))  # noqa: E731
    if not known(b.shape[0]):
        return None
    nseg = eval_int(b.shape[0], env) - 1
    bounds = [eval_int(e, env) for e in an.offsets.get(off, ()) if known(e)]
    max_len = min(bounds) if bounds else env.get("max_len")
    return None if max_len is None else max(nseg, 0) * max_len


def randn(rng: np.random.Generator, shape, dtype: str = "f32", scale: float = 1.0
          ) -> np.ndarray:
    return as_dtype(rng.standard_normal(shape, dtype=np.float32) * scale, dtype)


def torch_inputs(op: Op, case: Case, device="cpu", float_dtype=None) -> dict:
    """Case inputs as torch tensors of the op's buffer dtypes (bf16 buffers become
    torch.bfloat16), or with every float input as `float_dtype` (float64 for oracles)."""
    import torch

    from ..ir.dtypes import torch_dtype

    out = {}
    for b in op.inputs:
        t = torch_dtype(b.dtype) if float_dtype is None or not b.dtype.is_float else float_dtype
        a = np.asarray(case.inputs[b.name])
        # (np.ascontiguousarray would make a 0-d scalar input 1-d)
        out[b.name] = torch.from_numpy(np.ascontiguousarray(a).reshape(a.shape)).to(
            device=device, dtype=t)
    return out
