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


@click.command("ops")
@json_option
def command(as_json: bool) -> None:
    """List the operators: the library's, then those installed by other packages (entry-point
    group kevolve.ops), with stages, inputs and shape presets. Spec files are not listed:
    pass them as path/to/spec.py:name."""
    from ..ir.printer import buffer

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
