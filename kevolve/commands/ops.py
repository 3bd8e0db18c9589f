"""`kevolve ops`: the operator library as a table."""

from __future__ import annotations

import click
from rich.table import Table
from rich.text import Text

from ._common import console, emit_json, json_option


@click.command("ops")
@json_option
def command(as_json: bool) -> None:
    """List the library's operators: stages, inputs and shape presets."""
    from .. import ops as library
    from ..ir.printer import buffer

    if as_json:
        emit_json([{"name": name, "stages": [s.name for s in library.get(name).op.stages],
                    "inputs": [buffer(b) for b in library.get(name).op.inputs],
                    "presets": library.get(name).shapes} for name in library.names()])
        return
    table = Table(title="kevolve operator library")
    for col in ("name", "stages", "inputs", "presets"):
        table.add_column(col)
    for name in library.names():
        d = library.get(name)
        presets = "\n".join(
            f"{p}: " + " ".join(f"{k}={v}" for k, v in shape.items())
            for p, shape in d.shapes.items())
        table.add_row(Text(name), Text(", ".join(s.name for s in d.op.stages)),
                      Text("\n".join(buffer(b) for b in d.op.inputs)), Text(presets))
    console().print(table)
