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
@click.option("--compile", "compile_", is_flag=True,
              help="Also compile the source with the backend's compiler (cc, nvcc for sm_90, "
                   "hipcc, Triton for sm_90; no GPU needed) and print its report on stderr: "
                   "registers, spills and shared memory where the compiler gives them. "
                   "Exit 1 if it does not compile.")
@json_option
def command(op_ref, backend_name, schedule_path, shape_args, output, compile_,
            as_json) -> None:
    from ..api import backend, lower

    be = backend(backend_name)
    op, opdef, sd = resolve(op_ref, shape_args, gpu=be.target.device != "cpu")
    dims = dims_for(op, opdef, sd)
    src = lower(op, load_trace(op, schedule_path, dims), be, dims)
    if output:
        Path(output).write_text(src.text)
    built = be.compile_log(src) if compile_ else None
    if as_json:
        emit_json({"op": op.name, "backend": backend_name, "dims": dims, "lang": src.lang,
                   "entry": src.entry, "flags": list(src.flags), "hash": src.hash,
                   "output": str(Path(output).resolve()) if output else None,
                   "source": src.text} | ({} if built is None else
                                          {"compiled": built[0], "compile_log": built[1]}))
    elif output:
        echo(f"wrote {output} ({src.lang}, {len(src.text.splitlines())} lines, "
             f"entry {src.entry})")
    else:
        echo(src.text.rstrip("\n"))
    if built is not None:
        if not as_json:
            click.echo(("compiled: " if built[0] else "did not compile: ") + built[1], err=True)
        if not built[0]:
            raise click.exceptions.Exit(1)
