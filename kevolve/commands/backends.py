"""`kevolve backends`: the backends this installation offers and whether they run here."""

from __future__ import annotations

import click

from ._common import console, emit_json, json_option


@click.command("backends", short_help="List backends and whether they can run here.")
@json_option
def command(as_json: bool) -> None:
    from rich.table import Table

    from ..backends.registry import get, names

    rows = []
    for name, target in sorted(names().items()):
        try:
            be = get(name)
            ok, why = be.available()
            rows.append({"name": name, "target": be.caps.device, "runs_here": ok,
                         "note": why})
        except Exception as e:  # a broken third-party backend must not hide the others
            rows.append({"name": name, "target": target, "runs_here": False,
                         "note": f"{type(e).__name__}: {e}"})
    if as_json:
        emit_json(rows)
        return
    t = Table(title="kevolve backends")
    for col in ("name", "target", "runs here", "note"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["name"], r["target"], "yes" if r["runs_here"] else "no", r["note"])
    console().print(t)
