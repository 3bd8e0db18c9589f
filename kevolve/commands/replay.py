"""`kevolve replay CANDIDATE`: re-render one archived candidate and evaluate it again.

How a person debugs a failure: the candidate's trace, the source kevolve generates for it
(backend and shape from its recorded result), the compiler's messages from compiling that
source again, and a fresh evaluation in a worker process with the recorded seeds, beside
the recorded result."""

from __future__ import annotations

import json

import click

from ._common import echo
from .archive import db_option, ms, open_archive, when


def _rule(title: str) -> None:
    echo(f"\n== {title} " + "=" * max(3, 76 - len(title)))


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
def command(candidate: int, db: str, backend: str | None, hardware: str | None,
            no_eval: bool, no_time: bool, timeout: float) -> None:
    from ..archive import ArchiveError

    with open_archive(db) as a:
        cand = a.candidate(candidate)
        if cand is None:
            raise ArchiveError(f"no candidate {candidate} in archive {db}")
        rows = [r for r in a.results(candidate)
                if (backend is None or r["backend"] == backend)
                and (hardware is None or r["hardware"] == hardware)]
    _rule(f"candidate {candidate}")
    echo(f"op {cand['op_name']}, proposer {cand['proposer'] or '?'}, generation "
         f"{cand['generation']}, parent {cand['parent_id'] if cand['parent_id'] else '-'}, "
         f"created {when(cand['created'])}")
    if cand["note"]:
        echo(f"note: {cand['note']}")
    if not rows:
        which = f" on backend {backend!r}" if backend else ""
        raise ArchiveError(f"candidate {candidate} has no recorded result{which} in archive "
                           f"{db}: nothing says which backend and shape to replay it on")
    row = rows[-1]
    rec = row["result"]
    echo(f"recorded on {row['backend']} / {row['hardware']} at {when(row['created'])}: "
         f"{_result_line(rec)}")
    echo(f"shape {json.dumps(row['shape'])}, seeds {row['seeds']}")
    if rec.message:
        echo("message: " + rec.message)
    _replay(cand, row, no_eval, no_time, timeout)


def _replay(cand: dict, row: dict, no_eval: bool, no_time: bool, timeout: float) -> None:
    from .. import api, pipeline
    from ..errors import KevolveError
    from ..ir.printer import op_text
    from ..ops import LIBRARY
    from ..schedule import MoveError, Trace

    _rule("trace")
    try:
        trace = Trace.from_json(cand["trace_json"])
    except MoveError as e:
        echo(cand["trace_json"])
        echo(f"\nnot a valid trace: {e}")
        return
    echo(trace.pretty())
    echo(trace.to_json())

    name = cand["op_name"]
    if name not in LIBRARY:
        raise click.UsageError(f"{name} is not a library op: replay needs its input "
                               "generators (kevolve.ops)")
    opdef = LIBRARY[name]
    shape = dict(row["shape"])
    op = opdef.op_for(shape)
    if op_text(op) != cand["ir_text"]:
        echo(f"\nnote: the library's {name} differs from the IR archived with this "
             "candidate (kevolve changed since); replaying against the current IR")
    dims = opdef.dims(shape)
    threads = _threads(row["hardware"])
    be = api.backend(row["backend"])
    opts = {"threads": threads} if be.target.host_threads and threads else {}
    if opts:
        be = api.backend(row["backend"], **opts)

    _rule(f"source ({row['backend']}, dims {json.dumps(dims)})")
    src = None
    try:
        src = pipeline.compile(op, trace, dims, be).source
    except MoveError as e:
        echo(f"legality: {e}")
        echo(json.dumps(e.to_dict(), indent=2))
    except KevolveError as e:  # a render failure is what this command is for
        echo(f"render failed: {pipeline.describe(e)}")
    if src is not None:
        echo(src.text.rstrip())
        _rule("compiler")
        ok, log = be.compile_log(src)
        echo(log)
        echo("compiled" if ok else "compile FAILED")

    if no_eval:
        return
    _rule("re-evaluation")
    from ..agent.types import EvalJob
    from ..agent.worker import WorkerPool

    small = opdef.shape("small")
    if "dtype" in shape:
        small["dtype"] = shape["dtype"]
    checks = (small,) + tuple({**e, **({"dtype": shape["dtype"]} if "dtype" in shape else {})}
                              for e in opdef.edge_shapes)
    seeds = tuple(int(s) for s in row["seeds"]) or (0, 1, 2)
    job = EvalJob(name, row["backend"], trace.to_json(), shape, checks, seeds, opts,
                  check_bench_shape=True, time=not no_time, threads=threads,
                  baseline=not no_time, candidate_id=cand["id"])
    with WorkerPool(1, timeout_s=timeout) as pool:
        ((_, res),) = list(pool.map([job]))
    echo(f"now:      {_result_line(res)} ({res.seconds:.1f} s)")
    echo(f"recorded: {_result_line(row['result'])}")
    if res.message:
        echo("message: " + res.message)
    for k, v in sorted(res.diagnostics.items()):
        if k != "error" and isinstance(v, (int, float, str)):
            echo(f"  {k}: {v}")


def _threads(hardware: str) -> int | None:
    """CPU threads from a hardware name like `cpu:<model>:8t`."""
    tail = hardware.rsplit(":", 1)[-1]
    if hardware.startswith("cpu:") and tail.endswith("t") and tail[:-1].isdigit():
        return int(tail[:-1])
    return None
