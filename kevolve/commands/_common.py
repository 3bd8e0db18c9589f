"""Helpers shared by the command modules: output (tables that are never cut when piped, one
JSON document under --json, progress bars only on a terminal) and the two failure kinds.

Exit codes, the same for every command: 0 = ok; 1 = the kernel or the search failed (a
wrong result, a failed build, nothing that passed), raised as `Failed`; 2 = the user's
mistake (a bad argument, file or name; a missing extra or device), raised as `BadInput`
or `click.UsageError` here, or as a kevolve error class that kevolve.cli maps to 2.
Under --json, stdout holds exactly one JSON document (also when a command exits 1 with a
result to show); messages and progress go to stderr."""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console

NO_WRAP_WIDTH = 10_000  # piped output: rich would otherwise cut and wrap at 80 columns


class Failed(click.ClickException):
    """The kernel or the search failed: exit 1, one paragraph on stderr."""

    exit_code = 1

    def show(self, file=None) -> None:
        click.echo(f"kevolve: {' '.join(self.format_message().split())}", err=True)


class BadInput(click.ClickException):
    """A mistake in the user's input or setup (not a usage-syntax error): exit 2, one
    paragraph on stderr."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"kevolve: error: {' '.join(self.format_message().split())}", err=True)


def console(stderr: bool = False, quiet: bool = False) -> Console:
    """A console on the current stdout (so click's test runner captures it), or stderr.
    On a terminal rich fits tables to its width; piped or redirected, lines are never cut
    or wrapped (a hint like `pip install 'kevolve[triton]'` must survive `| less`).
    No markup highlighting surprises: print IR text with `echo`, tables with rich."""
    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    return Console(file=stream, highlight=False, quiet=quiet,
                   width=None if tty else NO_WRAP_WIDTH, soft_wrap=not tty)


def printable(text: str) -> str:
    """Text with control characters (terminal escape sequences, carriage returns, NULs)
    written as Python escapes: text from an archive or a spec must not drive the
    terminal. Newlines and tabs stay."""
    text = str(text)
    if all(c.isprintable() or c in "\n\t" for c in text):
        return text
    return "".join(c if c.isprintable() or c in "\n\t"
                   else c.encode("unicode_escape").decode("ascii") for c in text)


def echo(text: str = "", err: bool = False) -> None:
    """Plain text on stdout (or stderr), control characters escaped (printable)."""
    click.echo(printable(text), err=err)


def emit_json(doc) -> None:
    """The one JSON document a --json run prints on stdout."""
    click.echo(json.dumps(doc, indent=1, default=str))


def progress(as_json: bool, *extra_columns):
    """A rich progress bar on stderr when stderr is a terminal and --json is off; a silent
    one otherwise (same API, prints nothing)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    con = Console(stderr=True)
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                    MofNCompleteColumn(), *extra_columns, TimeElapsedColumn(),
                    console=con, transient=False,
                    disable=as_json or not con.is_terminal)


def require(module: str, extra: str, why: str):
    """Import an optional dependency, or exit 2 naming the extra that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise BadInput(f"{why} needs {module}, which is not installed ({e}): install it "
                       f"with pip install 'kevolve[{extra}]'") from None


def require_torch(why: str):
    return require("torch", "torch", why)


json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print one JSON document on stdout (messages go to stderr).")

op_argument = click.argument("op_ref", metavar="OP")
OP_HELP = ("OP is a library op or an installed plug-in op (see `kevolve ops`), or a spec file "
           "`path/to/spec.py[:name]`.")
