"""Helpers shared by the command modules."""

from __future__ import annotations

import click
from rich.console import Console


def console() -> Console:
    """A console on the current stdout (so click's test runner captures it); no markup
    highlighting surprises: print IR text with `echo`, tables with rich."""
    return Console(highlight=False)


def echo(text: str = "") -> None:
    click.echo(text)


op_argument = click.argument("op_ref", metavar="OP")
OP_HELP = "OP is a library op name (see `kevolve ops`) or a spec file `path/to/spec.py:name`."
