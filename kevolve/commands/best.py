"""`kevolve best OP --backend B`: the fastest archived schedule of an op, with its time."""

from __future__ import annotations

import json

import click

from ._common import OP_HELP, echo, op_argument
from .archive import db_option, ms, open_archive, require_best, require_op, when


@click.command("best", short_help="Print the best archived schedule of an op.",
               help="Print the fastest schedule (trace JSON) the archive holds for OP on a "
               "backend: the candidate whose latest result passed every check with the lowest "
               f"median time, on any hardware unless --hardware is given. With --trace, only "
               f"the trace: `kevolve best OP -b B --trace > t.json` gives a file that "
               f"`kevolve run/lower/show --schedule t.json` reads. {OP_HELP}")
@op_argument
@click.option("--backend", "-b", required=True, metavar="NAME", help="Backend, e.g. cpu.")
@click.option("--hardware", metavar="NAME", help="Only results on this hardware.")
@db_option
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object: time, speedup, hardware, candidate and the trace.")
@click.option("--trace", "trace_only", is_flag=True,
              help="Print only the trace (schedule JSON), ready for --schedule FILE.")
def command(op_ref: str, backend: str, hardware: str | None, db: str, as_json: bool,
            trace_only: bool) -> None:
    if as_json and trace_only:
        raise click.UsageError("give --json or --trace, not both")
    with open_archive(db) as a:
        name = require_op(a, op_ref)
        rec = require_best(a, name, backend, hardware, db)
    r = rec["result"]
    speedup = r.baseline_ms / r.time_ms if r.baseline_ms and r.time_ms else None
    from ..schedule import Trace

    trace = Trace.from_json(rec["trace_json"]).to_dict()  # archive text: checked, re-made
    if trace_only:
        echo(json.dumps(trace, indent=2))
        return
    if as_json:
        echo(json.dumps({
            "op": rec["op"], "backend": rec["backend"], "hardware": rec["hardware"],
            "candidate_id": rec["candidate_id"], "time_ms": r.time_ms,
            "times_ms": list(r.times_ms), "baseline_ms": r.baseline_ms, "speedup": speedup,
            "proposer": rec["proposer"], "generation": rec["generation"],
            "parent_id": rec["parent_id"], "run_hash": rec["run_hash"],
            "toolchain": rec["toolchain"], "shape": rec["shape"], "seeds": rec["seeds"],
            "evaluated": rec["created"], "trace": trace}, indent=2))
        return
    vs = (f", torch eager {ms(r.baseline_ms)} ms, {speedup:.2f}x" if speedup else "")
    echo(f"best {rec['op']} on {rec['backend']} (hardware {rec['hardware']}): "
         f"{ms(r.time_ms)} ms{vs}")
    echo(f"candidate {rec['candidate_id']} by {rec['proposer'] or '?'} "
         f"(generation {rec['generation']}), evaluated {when(rec['created'])}"
         + (f", shape {json.dumps(rec['shape'])}" if rec["shape"] else ""))
    echo(json.dumps(trace, indent=2))
    echo("(`kevolve best ... --trace > t.json` writes just the trace, for --schedule t.json)",
         err=True)
