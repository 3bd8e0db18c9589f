"""Operators: the library (each written once in the IR, with shape presets and the torch
code a user would write), users' spec files and ops other packages install. `resolve` is the
one way every command turns what a user types into an OpDef:

- a library name (`softmax`);
- `aten.NAME`: an operator of the ATen catalog (kevolve.ops.aten, loaded on first use);
- a spec file `path/to/spec.py[:name]` binding an Op or a `define(...)` result;
- an op another package installs through the entry-point group `kevolve.ops` (the entry
  point names an OpDef, an Op, or a function of no arguments returning one).

`define`, `lengths` and `domain` (kevolve.ops.spec) are the spec API."""

from __future__ import annotations

import os
from dataclasses import replace
from functools import lru_cache
from importlib.metadata import entry_points

from ..errors import UnknownName
from ..ir.errors import SpecError
from ..ir.nodes import Op
from ..ir.specfile import is_spec_ref, load_spec, split_ref
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
from .spec import define, domain, lengths

__all__ = ["GROUP", "LIBRARY", "Case", "OpDef", "define", "domain", "get", "lengths", "names",
           "plugins", "resolve"]

GROUP = "kevolve.ops"

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


def plugins() -> dict[str, str]:
    """Op name -> 'module:attr' of every op installed through the `kevolve.ops` group."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def resolve(ref: str) -> OpDef:
    """The OpDef of a library name, a spec file `path/spec.py[:name]` or an installed
    plug-in op; UnknownName (exit 2) listing what there is for anything else. The OpDef's
    `ref` finds it again from another process (a spec's path made absolute)."""
    if is_spec_ref(ref):
        path, name = split_ref(ref)
        path = os.path.abspath(path)
        mtime = os.path.getmtime(path) if os.path.isfile(path) else None
        return _spec(path, name, mtime)
    if ref in LIBRARY:
        return replace(LIBRARY[ref], ref=ref)
    if ref.startswith("aten."):
        from .aten import get as catalog_op
        return replace(catalog_op(ref), ref=ref)
    for ep in entry_points(group=GROUP):
        if ep.name == ref:
            return _as_opdef(ep.load(), ref, f"entry point {ref} = {ep.value!r}")
    known = ", ".join(LIBRARY)
    plug = ", ".join(plugins())
    raise UnknownName(f"unknown op {ref!r}; library ops: {known}"
                      + (f"; installed ops: {plug}" if plug else "")
                      + "; ATen catalog ops: aten.NAME (kevolve ops --family F lists them)"
                      + "; or pass a spec file as path/to/spec.py:name")


@lru_cache(maxsize=64)
def _spec(path: str, name: str | None, mtime: float | None) -> OpDef:
    value, bound = load_spec(f"{path}:{name}" if name else path)
    return _as_opdef(value, f"{path}:{bound}", path)


def _as_opdef(value, ref: str, where: str) -> OpDef:
    if callable(value) and not isinstance(value, (Op, OpDef)):
        value = value()
    if isinstance(value, Op):
        value = define(value)
    if not isinstance(value, OpDef):
        raise SpecError(f"{where} gives a {type(value).__name__}, not an Op or an OpDef",
                        "bind the result of op(...) or define(...)", loc=where)
    return replace(value, ref=ref)
