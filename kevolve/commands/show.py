"""`kevolve show OP`: the IR of an operator and a schedule for it."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import OP_HELP, echo, op_argument


@click.command("show", short_help="Print the IR of an op and a schedule.",
               help=f"Print the IR of OP and a schedule (the default one unless "
               f"--schedule is given). {OP_HELP}")
@op_argument
@click.option("--schedule", "schedule_path", metavar="TRACE.json",
              type=click.Path(exists=True, dir_okay=False),
              help="A schedule trace (JSON) to print instead of the default schedule.")
def command(op_ref: str, schedule_path: str | None) -> None:
    from ..ir.printer import op_text
    from ..ops import resolve

    op = resolve(op_ref)
    echo(op_text(op))
    echo()
    if schedule_path is not None:
        from ..schedule import Trace

        trace = Trace.from_json(Path(schedule_path).read_text())
        echo(f"schedule ({schedule_path}):")
        echo(trace.pretty())
        return
    from ..schedule import default_trace

    echo("default schedule:")
    echo(default_trace(op).pretty())
