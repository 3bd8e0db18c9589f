"""The `kevolve` subcommands, one module each.

To add a command NAME: write kevolve/commands/NAME.py defining a click command called
`command` (keep the module's top-level imports light: click, rich and kevolve.ir; import
torch, triton, the op library, backends... inside the function), then add NAME to
COMMANDS. Raise SpecError, KeyError or any kevolve error for a user's mistake: kevolve.cli
turns it into a one-paragraph message and exit code 2 (`kevolve --debug` shows the
traceback). Command modules are imported only when their command is looked up.
"""

COMMANDS: tuple[str, ...] = (
    "ops", "show", "demo", "lower", "run", "backends", "evolve", "best", "history",
    "archive", "export", "replay", "bench", "conform", "show-prompt",
)
