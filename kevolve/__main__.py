"""`python -m kevolve`: the same command line as the `kevolve` script."""

from .cli import main

main(prog_name="kevolve")
