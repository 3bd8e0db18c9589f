"""`kevolve lower OP --backend B`: print or write the generated source."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import OP_HELP, echo, emit_json, json_option, op_argument
from ._shapes import backend_option, dims_for, load_trace, resolve, schedule_option, shape_option


@click.command("lower", short_help="Print the source a backend generates for an op.",
               help=f"Lower OP with a schedule for a backend and print (or write) the source. "
               f"{OP_HELP}")
@op_argument
@backend_option
@schedule_option
@shape_option
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE.")
@json_option
def command(op_ref, backend_name, schedule_path, shape_args, output, as_json) -> None:
    from ..api import backend, lower

    be = backend(backend_name)
    op, opdef, sd = resolve(op_ref, shape_args, gpu=be.target.device != "cpu")
    dims = dims_for(op, opdef, sd)
    src = lower(op, load_trace(op, schedule_path, dims), be, dims)
    if output:
        Path(output).write_text(src.text)
    if as_json:
        emit_json({"op": op.name, "backend": backend_name, "dims": dims, "lang": src.lang,
                   "entry": src.entry, "flags": list(src.flags), "hash": src.hash,
                   "output": str(Path(output).resolve()) if output else None,
                   "source": src.text})
    elif output:
        echo(f"wrote {output} ({src.lang}, {len(src.text.splitlines())} lines, "
             f"entry {src.entry})")
    else:
        echo(src.text.rstrip("\n"))
