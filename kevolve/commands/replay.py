"""`kevolve replay CANDIDATE`: re-render one archived candidate and evaluate it again.

How a person debugs a failure: the candidate's trace, the source kevolve generates for it
(backend and shape from its recorded result), the compiler's messages from compiling that
source again, and a fresh evaluation in a worker process with the recorded seeds, beside
the recorded result."""

from __future__ import annotations

import json

import click

from ._common import Failed, echo, emit_json
from .archive import db_option, ms, open_archive, when


class _Out:
    """What replay shows: printed as it goes, or gathered into one JSON document."""

    def __init__(self, as_json: bool):
        self.as_json, self.doc = as_json, {}

    def echo(self, text: str = "") -> None:
        if not self.as_json:
            echo(text)

    def rule(self, title: str) -> None:
        self.echo(f"\n== {title} " + "=" * max(3, 76 - len(title)))


def _result_line(r) -> str:
    parts = [r.verdict]
    if r.time_ms is not None:
        parts.append(f"{ms(r.time_ms)} ms")
    if r.baseline_ms:
        parts.append(f"torch eager {ms(r.baseline_ms)} ms")
    if r.max_error is not None:
        parts.append(f"max error {r.max_error:.3g}")
    return ", ".join(parts)


@click.command("replay", short_help="Re-render, recompile and re-evaluate an archived "
               "candidate.",
               help="Show one archived candidate (by id) the way a person debugs it: its "
               "trace, the source kevolve generates for it (backend and shape from its "
               "recorded result), the compiler's messages from compiling that source again, "
               "and a fresh evaluation in a worker process with the recorded seeds, next to "
               "the recorded result.")
@click.argument("candidate", type=int)
@db_option
@click.option("--backend", "-b", metavar="NAME",
              help="Which recorded result to replay (default: the latest).")
@click.option("--hardware", metavar="NAME", help="Which recorded result to replay.")
@click.option("--no-eval", is_flag=True, help="Only render and compile; do not evaluate.")
@click.option("--no-time", is_flag=True, help="Check correctness only; skip timing.")
@click.option("--timeout", type=float, default=300.0, show_default=True,
              help="Seconds before the evaluating worker is killed.")
@click.option("--op", "op_ref", metavar="OP",
              help="Where the candidate's op is found (a spec file path/spec.py:name or an "
              "installed op; default: its archived name).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object: the candidate, trace, source, compiler messages and both "
              "results. Exit 1 when the candidate fails to compile or fails now.")
def command(candidate: int, db: str, backend: str | None, hardware: str | None,
            no_eval: bool, no_time: bool, timeout: float, op_ref: str | None,
            as_json: bool) -> None:
    from ..archive import ArchiveError


    with open_archive(db) as a:
        cand = a.candidate(candidate)
        if cand is None:
            raise ArchiveError(f"no candidate {candidate} in archive {db}")
        rows = [r for r in a.results(candidate)
                if (backend is None or r["backend"] == backend)
                and (hardware is None or r["hardware"] == hardware)]
    out = _Out(as_json)
    out.rule(f"candidate {candidate}")
    out.echo(f"op {cand['op_name']}, proposer {cand['proposer'] or '?'}, generation "
         f"{cand['generation']}, parent {cand['parent_id'] if cand['parent_id'] else '-'}, "
         f"created {when(cand['created'])}")
    if cand["note"]:
        out.echo(f"note: {cand['note']}")
    if not rows:
        which = f" on backend {backend!r}" if backend else ""
        raise ArchiveError(f"candidate {candidate} has no recorded result{which} in archive "
                           f"{db}: nothing says which backend and shape to replay it on")
    row = rows[-1]
    rec = row["result"]
    out.doc.update(candidate=candidate, op=cand["op_name"], proposer=cand["proposer"],
                   generation=cand["generation"], parent_id=cand["parent_id"],
                   backend=row["backend"], hardware=row["hardware"], shape=row["shape"],
                   seeds=row["seeds"], recorded=rec.to_dict())
    out.echo(f"recorded on {row['backend']} / {row['hardware']} at {when(row['created'])}: "
         f"{_result_line(rec)}")
    out.echo(f"shape {json.dumps(row['shape'])}, seeds {row['seeds']}")
    if rec.message:
        out.echo("message: " + rec.message)
    _replay(cand, row, no_eval, no_time, timeout, out, op_ref)
    if as_json:
        emit_json(out.doc)
    if out.doc.get("failed"):
        raise Failed(f"candidate {candidate} {out.doc['failed']}")


def _replay(cand: dict, row: dict, no_eval: bool, no_time: bool, timeout: float,
            out: _Out, op_ref: str | None = None) -> None:
    from .. import api, pipeline
    from ..errors import KevolveError
    from ..ir.printer import op_text
    from ..ops import resolve
    from ..schedule import MoveError, Trace

    out.rule("trace")
    try:
        trace = Trace.from_json(cand["trace_json"])
    except MoveError as e:
        out.echo(cand["trace_json"])
        out.echo(f"\nnot a valid trace: {e}")
        out.doc.update(trace=None, failed=f"has no valid trace: {e}")
        return
    out.echo(trace.pretty())
    out.echo(trace.to_json())
    out.doc["trace"] = trace.to_dict()

    name = cand["op_name"]
    opdef = resolve(op_ref or name)
    if opdef.name != name:
        raise click.UsageError(f"--op {op_ref} is the op {opdef.name!r}, but candidate "
                               f"{cand['id']} belongs to {name!r}")
    shape = dict(row["shape"])
    op = opdef.op_for(shape)
    if op_text(op) != cand["ir_text"]:
        out.echo(f"\nnote: the current {name} differs from the IR archived with this "
             "candidate (kevolve changed since); replaying against the current IR")
    dims = opdef.dims(shape)
    threads = _threads(row["hardware"])
    be = api.backend(row["backend"])
    opts = {"threads": threads} if be.target.host_threads and threads else {}
    if opts:
        be = api.backend(row["backend"], **opts)

    out.rule(f"source ({row['backend']}, dims {json.dumps(dims)})")
    src = None
    try:
        src = pipeline.compile(op, trace, dims, be).source
    except MoveError as e:
        out.echo(f"legality: {e}")
        out.echo(json.dumps(e.to_dict(), indent=2))
        out.doc.update(legality=e.to_dict(), failed=f"is illegal now: {e}")
    except KevolveError as e:  # a render failure is what this command is for
        out.echo(f"render failed: {pipeline.describe(e)}")
        out.doc["failed"] = f"does not render now: {pipeline.describe(e)}"
    if src is not None:
        out.echo(src.text.rstrip())
        out.rule("compiler")
        ok, log = be.compile_log(src)
        out.echo(log)
        out.echo("compiled" if ok else "compile FAILED")
        out.doc.update(source=src.text, source_hash=src.hash,
                       compiler={"ok": ok, "log": log})
        if not ok:
            out.doc["failed"] = "does not compile now (the compiler's messages are above)"

    if no_eval:
        return
    out.rule("re-evaluation")
    from ..evaluate.job import EvalJob
    from ..evaluate.worker import WorkerPool

    small = opdef.shape("small")
    if "dtype" in shape:
        small["dtype"] = shape["dtype"]
    checks = (small,) + tuple({**e, **({"dtype": shape["dtype"]} if "dtype" in shape else {})}
                              for e in opdef.edge_shapes)
    seeds = tuple(int(s) for s in row["seeds"]) or (0, 1, 2)
    job = EvalJob(opdef.ref, row["backend"], trace.to_json(), shape, checks, seeds, opts,
                  check_bench_shape=True, time=not no_time, threads=threads,
                  baseline=not no_time, candidate_id=cand["id"])
    with WorkerPool(1, timeout_s=timeout) as pool:
        ((_, res),) = list(pool.map([job]))
    out.doc["now"] = res.to_dict()
    if not res.ok:
        out.doc.setdefault("failed", f"fails now: {_result_line(res)}")
    out.echo(f"now:      {_result_line(res)} ({res.seconds:.1f} s)")
    out.echo(f"recorded: {_result_line(row['result'])}")
    if res.message:
        out.echo("message: " + res.message)
    for k, v in sorted(res.diagnostics.items()):
        if k != "error" and isinstance(v, (int, float, str)):
            out.echo(f"  {k}: {v}")


def _threads(hardware: str) -> int | None:
    """CPU threads from a hardware name like `cpu:<model>:8t`."""
    tail = hardware.rsplit(":", 1)[-1]
    if hardware.startswith("cpu:") and tail.endswith("t") and tail[:-1].isdigit():
        return int(tail[:-1])
    return None
