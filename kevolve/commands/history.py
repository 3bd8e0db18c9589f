"""`kevolve history OP`: the candidates of an op's searches in order, with best-so-far."""

from __future__ import annotations

import json

import click

from ._common import OP_HELP, console, echo, op_argument
from .archive import db_option, ms, open_archive, require_op

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None], width: int = 60) -> str:
    """Best-so-far as bars (taller = slower), sampled down to `width`; blank before the
    first success."""
    if len(values) > width:
        values = [values[round(i * (len(values) - 1) / (width - 1))] for i in range(width)]
    known = [v for v in values if v is not None]
    if not known:
        return ""
    lo, hi = min(known), max(known)
    return "".join(" " if v is None else BARS[0 if hi == lo else round((v - lo) / (hi - lo) * 7)]
                   for v in values)


@click.command("history", short_help="Show an op's search: each candidate, best so far.",
               help="Show every evaluated candidate of OP in the order it was evaluated, "
               "with its verdict, its time and the best time so far, per backend and "
               f"hardware. {OP_HELP}")
@op_argument
@click.option("--backend", "-b", metavar="NAME", help="Only this backend.")
@click.option("--hardware", metavar="NAME", help="Only this hardware.")
@db_option
@click.option("--last", type=click.IntRange(min=1), metavar="N",
              help="Only the last N rows of each table (the sparkline covers all).")
@click.option("--json", "as_json", is_flag=True, help="The rows as a JSON list.")
def command(op_ref: str, backend: str | None, hardware: str | None, db: str,
            last: int | None, as_json: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    from ..archive import ArchiveError
    from .archive import what_is_there

    with open_archive(db) as a:
        name = require_op(a, op_ref)
        rows = a.history(name, backend, hardware)
        if not rows:
            narrowed = "".join(f" on {k} {v!r}" for k, v in (("backend", backend),
                                                            ("hardware", hardware)) if v)
            raise ArchiveError(f"no evaluated candidates of {name!r}{narrowed} in archive "
                               f"{db}; {what_is_there(a, name)}")
    if as_json:
        echo(json.dumps(rows, indent=2))
        return
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["backend"], r["hardware"]), []).append(r)
    out = console()
    for (be, hw), group in groups.items():
        ok = [r for r in group if r["verdict"] == "ok"]
        best = min((r for r in ok if r["time_ms"] is not None), key=lambda r: r["time_ms"],
                   default=None)
        found = (f", best {ms(best['time_ms'])} ms (candidate {best['candidate_id']}, "
                 f"#{best['index']})" if best else ", none passed")
        echo(f"{name} on {be}, hardware {hw}: {len(group)} candidates, {len(ok)} ok{found}")
        echo(f"best so far: {sparkline([r['best_ms'] for r in group])}")
        t = Table("#", "candidate", "proposer", "gen", "verdict", "time ms", "best ms")
        for r in group[-last:] if last else group:
            t.add_row(str(r["index"]), str(r["candidate_id"]), Text(r["proposer"] or "-"),
                      str(r["generation"]),
                      Text(r["verdict"], style="" if r["verdict"] == "ok" else "red"),
                      ms(r["time_ms"]), ms(r["best_ms"]) + (" *" if r["improved"] else ""))
        out.print(t)
