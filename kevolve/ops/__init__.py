"""The operator library: every op written once in the IR, with shape presets, random input
generators and the torch eager code a user would write. `LIBRARY` is the registry; `resolve`
turns what a user types (a library name or `path/spec.py:name`) into an Op."""

from __future__ import annotations

from ..errors import UnknownName
from ..ir.nodes import Op
from ..ir.specfile import is_spec_ref, load_op
from .base import Case, OpDef
from .embedding import EMBEDDING_BAG, EMBEDDING_BAG_MEAN
from .gemm import GEMM, GEMM_BIAS_GELU
from .interaction import DOT_INTERACTION
from .jagged import (
    JAGGED_DENSE_ELEMENTWISE_ADD,
    JAGGED_MEAN,
    JAGGED_SOFTMAX,
    JAGGED_SUM,
    JAGGED_TO_PADDED_DENSE,
)
from .norms import LAYERNORM, LOG_SOFTMAX, RMSNORM, SOFTMAX
from .pointwise import SWISH_ADD

__all__ = ["LIBRARY", "Case", "OpDef", "get", "names", "resolve"]

LIBRARY: dict[str, OpDef] = {d.name: d for d in (
    SOFTMAX, LOG_SOFTMAX, LAYERNORM, RMSNORM, SWISH_ADD, GEMM, GEMM_BIAS_GELU,
    EMBEDDING_BAG, EMBEDDING_BAG_MEAN, JAGGED_SUM, JAGGED_MEAN, JAGGED_SOFTMAX,
    JAGGED_TO_PADDED_DENSE, JAGGED_DENSE_ELEMENTWISE_ADD, DOT_INTERACTION,
)}


def names() -> list[str]:
    return list(LIBRARY)


def get(name: str) -> OpDef:
    try:
        return LIBRARY[name]
    except KeyError:
        raise UnknownName(f"no op named {name!r}; available: {', '.join(LIBRARY)}") from None


def resolve(ref: str) -> Op:
    """A library op by name (`softmax`), or an Op from a spec file (`path/spec.py:name`).
    An unknown library name raises UnknownName (a KeyError) listing the library."""
    if is_spec_ref(ref):
        return load_op(ref)
    try:
        return LIBRARY[ref].op
    except KeyError:
        known = ", ".join(LIBRARY) or "(none)"
        raise UnknownName(f"unknown op {ref!r}; library ops: {known}; or pass a spec file as "
                       "path/to/spec.py:name") from None
