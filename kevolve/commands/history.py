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
@click.option("--by", "by", type=click.Choice(["proposer"]), default=None,
              help="Progress grouped by proposer: candidates, failures, reused, the times "
              "each improved the best so far, its best time, tokens spent.")
@click.option("--json", "as_json", is_flag=True, help="The rows as a JSON list.")
def command(op_ref: str, backend: str | None, hardware: str | None, db: str,
            last: int | None, by: str | None, as_json: bool) -> None:
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
        usage = a.usage_totals() if by else {}
    if by:
        table = by_proposer(rows, usage)
        if as_json:
            echo(json.dumps(table, indent=2))
            return
        t = Table("backend", "hardware", "proposer", "candidates", "failed", "reused",
                  "improved best", "best ms", "first at #", "tokens in/out",
                  title=f"{name}: progress by proposer")
        for r in table:
            t.add_row(r["backend"], r["hardware"], Text(r["proposer"]), str(r["candidates"]),
                      str(r["failed"]), str(r["reused"]), str(r["improved"]),
                      ms(r["best_ms"]), str(r["first_best_index"] or "-"),
                      f"{r['input_tokens']}/{r['output_tokens']}" if r["calls"] else "-")
        console().print(t)
        return
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


def by_proposer(rows: list[dict], usage: dict) -> list[dict]:
    """One row per (backend, hardware, proposer): candidates, failed, reused (identical
    code), improved (times it set a new best so far), best_ms, first_best_index (the
    evaluation that first reached that proposer's best), and the proposer's token usage
    (calls, input_tokens, output_tokens, over every model; a fall-back's `X->heuristic`
    candidates are charged to X's tokens)."""
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["backend"], r["hardware"], r["proposer"] or "-")
        g = out.setdefault(key, {"backend": key[0], "hardware": key[1], "proposer": key[2],
                                 "candidates": 0, "failed": 0, "reused": 0, "improved": 0,
                                 "best_ms": None, "first_best_index": None})
        g["candidates"] += 1
        g["failed"] += r["verdict"] != "ok"
        g["reused"] += bool(r.get("reused"))
        g["improved"] += bool(r["improved"])
        t = r["time_ms"]
        if t is not None and (g["best_ms"] is None or t < g["best_ms"]):
            g["best_ms"], g["first_best_index"] = t, r["index"]
    for g in out.values():
        base = g["proposer"].split("->")[0]
        tok = [v for (p, _), v in usage.items() if p == base]
        g["calls"] = sum(v["calls"] for v in tok)
        g["input_tokens"] = sum(v["input_tokens"] or 0 for v in tok)
        g["output_tokens"] = sum(v["output_tokens"] or 0 for v in tok)
    return list(out.values())
