"""`kevolve backends`: the backends this installation offers and whether they run here."""

from __future__ import annotations

import click

from ._common import console


@click.command("backends", short_help="List backends and whether they can run here.")
def command() -> None:
    from rich.table import Table

    from ..backends.registry import get, names

    t = Table(title="kevolve backends")
    for col in ("name", "target", "runs here", "note"):
        t.add_column(col)
    for name, target in sorted(names().items()):
        try:
            be = get(name)
            ok, why = be.available()
            t.add_row(name, be.caps.device, "yes" if ok else "no", why)
        except Exception as e:  # a broken third-party backend must not hide the others
            t.add_row(name, target, "no", f"{type(e).__name__}: {e}")
    console().print(t)
