"""`kevolve show OP`: the IR of an operator and a schedule for it."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import OP_HELP, echo, emit_json, json_option, op_argument


@click.command("show", short_help="Print the IR of an op and a schedule.",
               help=f"Print the IR of OP and a schedule (the default one unless "
               f"--schedule is given). {OP_HELP}")
@op_argument
@click.option("--schedule", "schedule_path", metavar="TRACE.json",
              type=click.Path(exists=True, dir_okay=False),
              help="A schedule trace (JSON) to print instead of the default schedule.")
@json_option
def command(op_ref: str, schedule_path: str | None, as_json: bool) -> None:
    from ..ir.printer import op_text
    from ..ops import resolve
    from ..schedule import Trace, apply_trace, default_trace

    op = resolve(op_ref).op
    trace = None
    if schedule_path is not None:  # a trace that does not apply to the op is an error (exit 2)
        trace = Trace.from_json(Path(schedule_path).read_text())
        apply_trace(op, trace)
    if as_json:
        trace = trace if trace is not None else default_trace(op)
        emit_json({"op": op.name, "ir": op_text(op), "schedule": trace.to_dict(),
                   "schedule_from": str(Path(schedule_path).resolve()) if schedule_path
                   else "default"})
        return
    echo(op_text(op))
    echo()
    if trace is not None:
        echo(f"schedule ({schedule_path}):")
        echo(trace.pretty())
        return
    echo("default schedule:")
    echo(default_trace(op).pretty())
