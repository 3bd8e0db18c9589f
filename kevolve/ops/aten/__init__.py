"""`kevolve.ops.aten`: ATen operators written as kevolve specs, each with its torch reference,
one module per family. Ops are made by general builders from tables (a unary formula, a
reduction kind and the dims it reduces, a convolution's stride/padding/dilation/groups...),
never tuned one by one. Every command finds them as `aten.NAME` (kevolve.ops.resolve);
`kevolve ops --family F` lists a family and `kevolve conform` checks them on a backend.

Conventions: fp32 everywhere, bf16/f16 variants for the pointwise families (a shape's
"dtype" picks one); stages store no booleans, so comparisons give 1.0/0.0; ATen's scalar
arguments are constants of the spec (a scalar that varies per call is a param); a layout
ATen expresses as a view (groups of channels, a flattened index) is the input's shape."""

from __future__ import annotations

from importlib import import_module

from ...errors import UnknownName
from ..base import OpDef

FAMILIES = ("unary", "binary", "comparison", "reduction", "scan", "softmax", "norm",
            "matmul", "conv", "pooling", "loss", "indexing", "shape", "jagged")


def _load() -> tuple[dict[str, OpDef], dict[str, str]]:
    catalog: dict[str, OpDef] = {}
    family: dict[str, str] = {}
    for fam in FAMILIES:
        for name, d in import_module(f"{__name__}.{fam}").OPS.items():
            assert d.name == "aten." + name, (fam, name, d.name)
            assert name not in catalog, f"aten.{name} defined twice"
            catalog[name] = d
            family[name] = fam
    return catalog, family


CATALOG, _FAMILY = _load()


def names(family: str | None = None) -> list[str]:
    """Op names (without the `aten.` prefix), in family order."""
    return [n for n in CATALOG if family is None or _FAMILY[n] == family]


def family_of(name: str) -> str:
    """The family of a catalog op; `spec` for anything else (a user's spec file)."""
    return _FAMILY.get(name.removeprefix("aten."), "spec")


def get(name: str) -> OpDef:
    """The OpDef of `NAME` or `aten.NAME`."""
    key = name.removeprefix("aten.")
    if key not in CATALOG:
        close = [n for n in CATALOG if key in n or n in key][:8]
        raise UnknownName(f"no ATen catalog op {name!r}"
                          + (f"; similar: {', '.join('aten.' + c for c in close)}" if close
                             else f"; families: {', '.join(FAMILIES)} (kevolve ops "
                                  "--family F lists one)"))
    return CATALOG[key]


def select(spec: str | None) -> list[str]:
    """Op names of a selection: None/'all', a family, or comma-separated op names and
    families (`aten.relu,reduction`); a spec file `path/spec.py:name` is kept as given."""
    from ...ir.specfile import is_spec_ref

    if spec in (None, "", "all"):
        return names()
    out: list[str] = []
    for part in spec.split(","):
        part = part.strip()
        got = names(part) if part in FAMILIES else [part] if is_spec_ref(part) else \
            [get(part).name.removeprefix("aten.")]
        out += [n for n in got if n not in out]
    return out
