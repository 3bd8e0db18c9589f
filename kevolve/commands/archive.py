"""`kevolve archive info|merge|export|import`: look into an archive and move its contents
between machines (e.g. bring back the archive of a search run on a GPU machine). Also the
helpers that `kevolve best` and `kevolve history` share."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from ..archive import DEFAULT_PATH, open_archive
from ._common import console, echo, emit_json, json_option

DB_HELP = ("The archive (an SQLite file). Default: $KEVOLVE_DB if set, else "
           f"{DEFAULT_PATH} under the current directory; relative paths are resolved "
           "against the current directory and shown in full.")
db_option = click.option(
    "--db", "db", metavar="PATH", default=str(DEFAULT_PATH), envvar="KEVOLVE_DB",
    type=click.Path(dir_okay=False, resolve_path=True), help=DB_HELP)


def require_op(archive, ref: str) -> str:
    """The archived name of any OP (kevolve.ops.resolve; a name no longer installed is taken
    as it is), or ArchiveError when the archive holds no op of that name."""
    from ..archive import ArchiveError
    from ..errors import UnknownName
    from ..ops import resolve

    try:
        name = resolve(ref).name
    except UnknownName:  # an archived op whose package is gone: its name still finds it
        name = ref
    names = archive.op_names()
    if name not in names:
        if not names:
            raise ArchiveError(f"archive {archive.path} is empty: it holds no ops yet (run "
                               "kevolve evolve first, or pass --db PATH)")
        raise ArchiveError(f"no op named {name!r} in archive {archive.path}; it holds: "
                           f"{', '.join(names)}")
    return name


def what_is_there(archive, name: str) -> str:
    """A clause saying which (backend, hardware) pairs hold results for the op."""
    groups = [g for g in archive.info()["groups"] if g["op"] == name]
    if not groups:
        return "it has no evaluated candidates yet"
    return "results there: " + "; ".join(
        f"{g['backend']} on {g['hardware']} ({g['candidates']} evaluated, {g['ok']} ok)"
        for g in groups)


def require_best(archive, name: str, backend: str, hardware: str | None, db: str) -> dict:
    """The archive's best record of the op on the backend (and hardware), or an error that
    says what the archive holds instead."""
    from ..archive import ArchiveError

    rec = archive.best_record(name, backend, hardware)
    if rec is None:
        on = f" on hardware {hardware!r}" if hardware else ""
        raise ArchiveError(f"no successful result for {name!r} on backend {backend!r}{on} "
                           f"in archive {db}; {what_is_there(archive, name)}")
    return rec


def ms(t: float | None) -> str:
    return "-" if t is None else f"{t:.4g}"


def when(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


_NOUNS = {"ops": "op", "candidates": "candidate", "results": "result", "ceilings": "ceiling",
          "usage": "usage record", "runs": "run", "baselines": "baseline"}


def _n(kind: str, n: int) -> str:
    noun = _NOUNS.get(kind, kind)
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _counts(counts: dict) -> str:
    parts = [_n(k, n) for k, n in counts.items() if k != "skipped" and n]
    skipped = [_n(k, n) for k, n in counts.get("skipped", {}).items() if n]
    text = "added " + (", ".join(parts) if parts else "nothing new")
    if skipped:
        text += "; skipped as already there: " + ", ".join(skipped)
    return text


@click.group("archive", short_help="Inspect, merge, export and import archives.")
def command() -> None:
    """The archive keeps every op, candidate and result of every search (an SQLite file,
    .kevolve/archive.db by default). Results are keyed by hardware, so one archive can hold
    a laptop's CPU results and an H200's: merge the archive a GPU machine wrote into yours,
    or export and import JSON lines."""


@command.command("info", short_help="Counts per op, backend and hardware.")
@db_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.option("--check", is_flag=True, help="Also run SQLite's integrity check.")
def info(db: str, as_json: bool, check: bool) -> None:
    """What the archive holds: counts per table, and per op, backend and hardware the
    candidates evaluated, how many passed, and the best time."""
    from rich.table import Table

    from ..archive import ArchiveError

    with open_archive(db) as a:
        data = a.info()
        data["size_bytes"] = Path(db).stat().st_size
        if check:
            data["integrity"] = a.check()
    if as_json:
        echo(json.dumps(data, indent=2))
    else:
        c = data["counts"]
        echo(f"archive {db} (schema {data['schema_version']}, "
             f"{data['size_bytes'] / 1e6:.2f} MB)")
        if not any(c.values()):
            echo("  empty: no ops, candidates or results yet")
        else:
            echo(f"  {_n('ops', c['ops'])}, {_n('candidates', c['candidates'])} "
                 f"({data['unevaluated']} never evaluated), {_n('results', c['results'])}, "
                 f"{c['usage']} LLM calls ({data['tokens']['input']} input / "
                 f"{data['tokens']['output']} output tokens), {_n('runs', c['runs'])}")
        if data.get("untrusted"):
            echo(f"  {data['untrusted']} merged result(s) not verified here: they count for "
                 "nothing until `kevolve archive verify` measures them on this machine")
        if data["groups"]:
            t = Table("op", "backend", "hardware", "evaluated", "ok", "failed", "best ms",
                      "last", title=None)
            for g in data["groups"]:
                t.add_row(g["op"], g["backend"], g["hardware"], str(g["candidates"]),
                          str(g["ok"]), str(g["failed"]), ms(g["best_ms"]), when(g["last"]))
            console().print(t)
        for hw, ceil in data["hardware"].items():
            if ceil:
                echo(f"  ceilings on {hw}: " + ", ".join(f"{k}={v}" for k, v in ceil.items()))
        if check:
            echo("  integrity check: " + "; ".join(data["integrity"]))
    if check and data["integrity"] != ["ok"]:
        raise ArchiveError(f"archive {db} failed SQLite's integrity check: "
                           + "; ".join(data["integrity"][:5]))


TRUST = click.option(
    "--trust", is_flag=True,
    help="Count the imported results as if measured here (default: untrusted until "
         "`kevolve archive verify` measures them again on this machine).")


@command.command("merge", short_help="Import another archive (e.g. from a GPU machine).")
@click.argument("other", metavar="OTHER.db")
@TRUST
@db_option
@json_option
def merge(other: str, trust: bool, db: str, as_json: bool) -> None:
    """Import every op, candidate, result, ceiling, token record and run of OTHER.db into
    the archive (created if missing), in one transaction. Ids are remapped; what is already
    there is skipped, so merging twice adds nothing. OTHER.db is only read.

    Merged results are evidence, not truth: they are marked with their origin and never
    become a best, seed a search, get reused or exported until `kevolve archive verify`
    measures them again here, unless --trust is given."""
    with open_archive(db, create=True) as a:
        counts = a.merge(other, trust=trust)
    if as_json:
        emit_json({"merged": str(Path(other).resolve()), "db": db, "counts": counts})
        return
    echo(f"merged {other} into {db}: {_counts(counts)}")


@command.command("export", short_help="Write the archive as JSON lines.")
@click.argument("out", metavar="OUT.jsonl")
@click.option("--op", "op_ref", metavar="OP", help="Only this op's candidates and results.")
@db_option
@json_option
def export(out: str, op_ref: str | None, db: str, as_json: bool) -> None:
    """Write the archive (or one op's part) to OUT.jsonl: a header line, then one
    self-describing JSON object per op, candidate, result, ceiling, token record and run,
    referring to each other by content hash. `kevolve archive import` reads it back."""
    from ..archive import ArchiveError

    with open_archive(db) as a:
        name = require_op(a, op_ref) if op_ref is not None else None
        if name is None and not a.op_names():
            raise ArchiveError(f"archive {db} is empty: nothing to export")
        counts = a.export_jsonl(out, op_name=name)
    if as_json:
        emit_json({"exported": str(Path(out).resolve()), "db": db, "counts": counts})
        return
    parts = ", ".join(_n(k if k == "usage" else k + "s", n) for k, n in counts.items() if n)
    echo(f"exported {parts} to {out}")


@command.command("import", short_help="Read JSON lines written by `archive export`.")
@click.argument("src", metavar="IN.jsonl")
@TRUST
@db_option
@json_option
def import_(src: str, trust: bool, db: str, as_json: bool) -> None:
    """Add what IN.jsonl holds to the archive (created if missing), all or nothing; records
    already there are skipped, so importing twice adds nothing. Imported results are
    untrusted until verified, as merged ones are."""
    with open_archive(db, create=True) as a:
        counts = a.import_jsonl(src, trust=trust)
    if as_json:
        emit_json({"imported": str(Path(src).resolve()), "db": db, "counts": counts})
        return
    echo(f"imported {src} into {db}: {_counts(counts)}")


@command.command("verify", short_help="Measure merged results again on this machine.")
@db_option
@click.option("--workers", type=int, default=1, show_default=True)
@click.option("--timeout", type=float, default=300.0, show_default=True,
              help="Seconds per candidate.")
@click.option("--threads", type=int, default=None, help="CPU threads (default: all).")
@json_option
def verify(db: str, workers: int, timeout: float, threads: int | None, as_json: bool) -> None:
    """Evaluate every merged (untrusted) ok result's candidate again here, with every check
    a search makes, and record what this machine measures as its own result. The merged
    result is marked verified and never counts itself; one that fails here is recorded as
    failed here."""
    from ..search.reverify import reverify

    rep = reverify(db, workers=workers, timeout_s=timeout, threads=threads)
    if as_json:
        emit_json({"db": db, **rep.to_dict()})
        return
    echo(f"verified {rep.checked} merged result(s) in {db}: {rep.ok} ok here, "
         f"{len(rep.failed)} failed here, {len(rep.skipped)} could not be verified")
    for cand, verdict, message in rep.failed:
        echo(f"  candidate {cand}: {verdict}: {message}")
    for cand, why in rep.skipped:
        echo(f"  candidate {cand}: not verified: {why}")
