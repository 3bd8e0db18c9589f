"""`kevolve ops`: the operator library and the ops other packages install, as a table."""

from __future__ import annotations

import click
from rich.table import Table
from rich.text import Text

from ._common import console, emit_json, json_option


def _entries():
    """(name, where, OpDef or the error that kept it from loading) for every op."""
    from .. import ops
    from ..errors import UserError

    for name in ops.names():
        yield name, "library", ops.get(name)
    for name, target in ops.plugins().items():
        try:
            yield name, target, ops.resolve(name)
        except (UserError, ImportError) as e:  # a broken plug-in is listed, not fatal
            yield name, target, e


def _family(family: str, as_json: bool) -> None:
    """One family of the ATen catalog, an op per row."""
    from ..errors import UnknownName
    from ..ir.printer import buffer
    from ..ops import aten

    if family not in aten.FAMILIES:
        raise UnknownName(f"no catalog family {family!r}; families: "
                          f"{', '.join(aten.FAMILIES)}")
    defs = [aten.get(n) for n in aten.names(family)]
    if as_json:
        emit_json([{"name": d.name, "from": f"aten.{family}",
                    "stages": [s.name for s in d.op.stages],
                    "inputs": [buffer(b) for b in d.op.inputs], "presets": d.shapes,
                    "reference": d.doc, "dtypes": list(d.variants) or ["f32"]}
                   for d in defs])
        return
    table = Table(title=f"ATen catalog: {family} ({len(defs)} ops)")
    for col in ("name", "reference", "inputs", "dtypes"):
        table.add_column(col)
    for d in defs:
        table.add_row(Text(d.name), Text(d.doc), Text(", ".join(buffer(b) for b in d.op.inputs)),
                      Text(", ".join(d.variants) or "f32"))
    console().print(table)


def _catalog_table() -> Table:
    from ..ops import aten

    table = Table(title=f"ATen catalog ({len(aten.CATALOG)} ops, run as aten.NAME; "
                  "kevolve ops --family F lists one family)")
    for col in ("family", "ops", "examples"):
        table.add_column(col)
    for fam in aten.FAMILIES:
        ns = aten.names(fam)
        table.add_row(Text(fam), Text(str(len(ns))),
                      Text(", ".join(ns[:6]) + (", ..." if len(ns) > 6 else "")))
    return table


@click.command("ops")
@json_option
@click.option("--family", default=None, metavar="F",
              help="List one family of the ATen catalog (unary, reduction, conv, ...).")
def command(as_json: bool, family: str | None) -> None:
    """List the operators: the library's, those installed by other packages (entry-point
    group kevolve.ops), with stages, inputs and shape presets, and the ATen catalog's
    families (`--family F` lists one). Spec files are not listed: pass them as
    path/to/spec.py:name."""
    from ..ir.printer import buffer

    if family is not None:
        _family(family, as_json)
        return
    rows = list(_entries())
    if as_json:
        emit_json([{"name": n, "from": where, "error": str(d)} if isinstance(d, Exception)
                   else {"name": n, "from": where, "stages": [s.name for s in d.op.stages],
                         "inputs": [buffer(b) for b in d.op.inputs], "presets": d.shapes,
                         "reference": d.has_reference} for n, where, d in rows])
        return
    table = Table(title="kevolve operators")
    for col in ("name", "from", "stages", "inputs", "presets"):
        table.add_column(col)
    for name, where, d in rows:
        if isinstance(d, Exception):
            table.add_row(Text(name), Text(where), Text(f"cannot load: {d}"), Text(""),
                          Text(""))
            continue
        presets = "\n".join(
            f"{p}: " + " ".join(f"{k}={v}" for k, v in shape.items())
            for p, shape in d.shapes.items())
        table.add_row(Text(name), Text(where), Text(", ".join(s.name for s in d.op.stages)),
                      Text("\n".join(buffer(b) for b in d.op.inputs)), Text(presets))
    console().print(table)
    console().print(_catalog_table())
