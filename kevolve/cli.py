"""The `kevolve` command line: the group, shared error handling and command lookup.

Commands live in kevolve/commands/NAME.py (see that package's docstring) and are imported
only when looked up, so `import kevolve.cli` and `kevolve --help` stay light (no torch,
triton, numba, ray or anthropic).

Errors map by class (kevolve.errors): a user's mistake (UserError: a bad spec, an unknown op
or preset, a bad trace or archive; also a malformed JSON file and click usage problems) exits
with code 2 and one paragraph on stderr; a kernel that failed (CandidateError: it did not
compile, crashed or computed wrong values) exits with code 1 and the compiler's message;
`kevolve --debug ...` adds the traceback to either. Anything else is a bug in kevolve and
gets Python's usual traceback.
"""

from __future__ import annotations

import importlib
import json
import traceback

import click

from .assets import version
from .commands import COMMANDS
from .errors import CandidateError, UserError

EXIT_CANDIDATE_FAILED = 1
EXIT_USER_ERROR = 2


def is_user_error(e: BaseException) -> bool:
    """Errors that describe a mistake in the user's input rather than a bug: a UserError, or
    a user's JSON file that does not parse."""
    return isinstance(e, (UserError, json.JSONDecodeError))


def error_paragraph(e: BaseException) -> str:
    """One paragraph: the message on a single line, whitespace collapsed."""
    if isinstance(e, KeyError) and len(e.args) == 1 and isinstance(e.args[0], str):
        msg = e.args[0]  # str(KeyError) would add quotes
    else:
        msg = str(e) or type(e).__name__
    if isinstance(e, json.JSONDecodeError):
        msg = f"invalid JSON: {msg}"
    return " ".join(msg.split())


class KevolveGroup(click.Group):
    """A group that finds commands in kevolve.commands lazily and reports user errors."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands:
            return self.commands[name]
        if name not in COMMANDS:
            return None
        module = importlib.import_module(f"kevolve.commands.{name.replace('-', '_')}")
        cmd = module.command
        self.add_command(cmd, name)
        return cmd

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as e:
            debug = ctx.params.get("debug")
            hint = "" if debug else " (kevolve --debug shows the traceback)"
            if is_user_error(e):
                if debug:
                    click.echo(traceback.format_exc().rstrip(), err=True)
                click.echo(f"kevolve: error: {error_paragraph(e)}{hint}", err=True)
                ctx.exit(EXIT_USER_ERROR)
            if isinstance(e, CandidateError):
                if debug:
                    click.echo(traceback.format_exc().rstrip(), err=True)
                where = f" ({e.stage})" if e.stage else ""
                click.echo(f"kevolve: the kernel failed{where}{hint}:\n{e}".rstrip(), err=True)
                ctx.exit(EXIT_CANDIDATE_FAILED)
            raise


@click.group(cls=KevolveGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(version=version(), prog_name="kevolve")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """kevolve: accelerator kernels as a search problem.

    Describe an operator once in a small tensor IR, then search schedules (replayable lists
    of moves) that backends lower to Triton, CUDA, HIP, C and numba kernels.
    """
    ctx.ensure_object(dict)["debug"] = debug


cli = main  # an alias for code that embeds the group

if __name__ == "__main__":
    main()
