"""`kevolve evolve OP --backend B`: search schedules, keep everything in the archive."""

from __future__ import annotations

import json
import sys

import click

from ._common import OP_HELP, BadInput, Failed, console, echo, op_argument, progress, require_torch
from ._shapes import backend_option, check, parse
from .archive import db_option


@click.command("evolve", short_help="Search schedules for an op on a backend.",
               help=f"Evolve schedules for OP: propose, check against the reference, time, "
               f"and keep every candidate and result in the archive. {OP_HELP}")
@op_argument
@backend_option
@click.option("--budget", type=int, default=64, show_default=True,
              help="Candidates to evaluate (with --resume: in total).")
@click.option("--minutes", type=float, default=None, help="Wall-time budget.")
@click.option("--proposer", type=click.Choice(["heuristic", "llm", "claude", "replay"]),
              default="heuristic", show_default=True,
              help="llm: any model through --transport; claude: llm over anthropic.")
@click.option("--traces", type=click.Path(exists=True, dir_okay=False),
              help="Trace file for --proposer replay.")
@click.option("--transport", type=click.Choice(["anthropic", "openai", "command", "recorded"]),
              default="anthropic", show_default=True,
              help="How --proposer llm reaches its model: the anthropic SDK, an "
              "OpenAI-compatible chat-completions server (--base-url or "
              "$KEVOLVE_OPENAI_BASE_URL, key $OPENAI_API_KEY), or a program (--command) "
              "reading the prompt as JSON on stdin and answering moves on stdout; recorded: "
              "the answers of --transcripts, in order.")
@click.option("--transcripts", type=click.Path(exists=True, dir_okay=False), default=None,
              help="--transport recorded: an archive whose prompts table holds the answers.")
@click.option("--model", default=None, help="Model for --proposer llm/claude "
              "(openai: or $KEVOLVE_OPENAI_MODEL).")
@click.option("--base-url", default=None, help="--transport openai: the server's base URL "
              "(e.g. http://localhost:8000/v1).")
@click.option("--command", "agent_command", default=None, metavar="'PROGRAM ARGS'",
              help="--transport command: the program (or $KEVOLVE_PROPOSER_COMMAND).")
@click.option("--temperature", type=float, default=1.0, show_default=True,
              help="Sampling temperature for --proposer llm/claude (recorded with each "
              "prompt, with the seed sent).")
@click.option("--workers", type=int, default=1, show_default=True)
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local",
              show_default=True)
@click.option("--address", default=None, help="Ray cluster address (--executor ray).")
@db_option
@click.option("--resume", is_flag=True, help="Continue the search in the archive.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--shape", "shape_args", multiple=True, metavar="PRESET|NAME=VAL")
@click.option("--threads", type=int, default=None, help="CPU threads (kernel and torch).")
@click.option("--timeout", type=float, default=300.0, show_default=True,
              help="Seconds per candidate before its worker is killed.")
@click.option("--mem-limit", type=float, default=16384, show_default=True,
              help="MB of resident memory per worker before it is killed (oom).")
@click.option("--roofline-slack", type=float, default=0.9, show_default=True,
              help="A time below this fraction of the roofline floor is too good to be "
              "true: timed again, and kept only if it no longer is (0 turns it off).")
@click.option("--refresh", type=int, default=4, show_default=True,
              help="Of the N fastest archived results, measure again those whose generated "
              "code has changed since (another kevolve, template or toolchain) before "
              "searching; not counted in --budget (0 turns it off).")
@click.option("--confirm", type=click.IntRange(min=0), default=3, show_default=True,
              help="At the end, time the K fastest candidates (distinct code) again over "
              "--confirm-rounds rounds, one at a time, and crown the best from the medians "
              "over rounds, with its spread (0 or 1: off).")
@click.option("--confirm-rounds", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--duel", type=click.IntRange(min=0), default=3, show_default=True,
              help="A candidate faster than the best on its one timing is timed again "
              "beside the best over N interleaved rounds, and leads only if it is faster "
              "there (not counted in --budget; 0: off).")
@click.option("--interpret", is_flag=True, help="Triton: use Triton's interpreter.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object on stdout (the summary); no progress bar. Exit 1 when no "
              "schedule passed.")
def command(op_ref, backend_name, budget, minutes, proposer, traces, transport, model,
            base_url, agent_command, transcripts, temperature, workers,
            executor, address, db, resume, seed, shape_args, threads, timeout, mem_limit,
            roofline_slack, refresh, confirm, confirm_rounds, duel, interpret,
            as_json) -> None:
    from rich.progress import TextColumn

    from ..api import backend
    from ..ops import resolve
    from ..search import STALL_ROUNDS, SearchConfig, evolve

    preset, over = parse(shape_args, None)
    opdef = resolve(op_ref)
    be = backend(backend_name, **({"interpret": True} if interpret else {}))
    on_gpu = be.target.on_device
    # a size that is not a number: exit 2 naming --shape, up front
    check(opdef, preset or ("gpu" if on_gpu else "cpu"), over)
    ok, why = be.available()
    if not ok and executor == "local":  # (a Ray cluster's machines may have the GPU)
        raise BadInput(f"backend {backend_name} cannot run here: {why}")
    require_torch("kevolve evolve (its torch baselines)")
    popts = {}
    if proposer == "replay":
        if not traces:
            raise click.UsageError("--proposer replay needs --traces FILE")
        popts["path"] = traces
    if proposer in ("claude", "llm"):
        popts["temperature"] = temperature
        if model:
            popts["model"] = model
    if proposer == "llm":
        popts["transport"] = transport
        if base_url:
            popts["base_url"] = base_url
        if agent_command:
            popts["command"] = agent_command
        if transcripts:
            popts["transcripts"] = transcripts
        from ..search.proposers import make as make_proposer
        make_proposer("llm", **popts)  # settings missing: exit 2 now, before any work
    cfg = SearchConfig(op_ref, backend_name, budget=budget, minutes=minutes,
                       proposer=proposer, proposer_options=popts, workers=workers,
                       executor=executor, address=address, db=db,
                       resume=resume, seed=seed, shape=preset, shape_overrides=over,
                       threads=threads, timeout_s=timeout, mem_limit_mb=mem_limit,
                       roofline_slack=roofline_slack, refresh=refresh, confirm=confirm,
                       confirm_rounds=confirm_rounds, duel=duel,
                       backend_options={"interpret": True} if interpret else {})
    prog = progress(as_json, TextColumn("{task.fields[status]}"))
    task = None

    def on_event(kind, data):
        nonlocal task
        if kind == "start":
            task = prog.add_task(f"evolve {op_ref} on {backend_name}", total=budget,
                                 completed=min(data["prior"], budget) if resume else 0,
                                 status=data["hardware"])
        elif kind == "remeasured" and task is not None:
            r = data["result"]
            now = f"{r.time_ms:.4g} ms" if r.ok and r.time_ms else r.verdict
            prog.update(task, status=f"re-measured {data['remeasured']} (code changed): "
                        f"candidate {data['candidate']} {data['was_ms']:.4g} ms -> {now}")
        elif kind == "duel" and task is not None:
            prog.update(task, status=f"candidate {data['candidate']} "
                        f"{'takes the lead' if data['won'] else 'not faster'} beside the best")
        elif kind == "confirmed" and task is not None:
            prog.update(task, status=f"re-timed {len(data['confirmed'])} leaders")
        elif kind == "pairing" and task is not None:
            prog.update(task, status=f"timing candidate {data['candidate']} beside torch eager")
        elif kind in ("result", "reused") and task is not None:
            if kind == "result":  # (a reused result, identical code, uses no budget)
                prog.advance(task)
                b, base = data["best"], data["baseline_ms"]
                best = b.result.time_ms if b else None
                fails = ", ".join(f"{k} {v}" for k, v in sorted(data["failures"].items()))
                status = f"best {best:.4g} ms" if best else "best -"
                if best and base:
                    status += f" ({base / best:.2f}x eager)"
                status += f" | failed {data['failed']}" + (f" ({fails})" if fails else "")
                prog.update(task, status=status)

    with prog:
        summ = evolve(cfg, on_event)
    res = {**summ.to_json(), "db": db}
    if as_json:
        sys.stdout.write(json.dumps(res) + "\n")
        _exit_on_failure(summ, db)
        return
    from rich.table import Table

    t = Table(title=f"kevolve evolve {summ.op} --backend {summ.backend}")
    # a re-measured column only when there were stale results
    again = {"re-measured": f"{summ.remeasured}" + (f" ({summ.remeasure_failed} failed)"
                                                    if summ.remeasure_failed else "")
             } if summ.remeasured else {}
    # and one for proposals skipped before evaluation, over the device's limits
    if summ.skipped:
        again["skipped"] = ", ".join(f"{v} {k.split('.', 1)[1]}"
                                     for k, v in sorted(summ.skipped.items()))
    torch_cols = ("torch eager ms", "torch.compile ms") if summ.reference else ()
    speed_cols = ("vs eager", "vs compile") if summ.reference else ("vs default",)
    for col in ("hardware", "evaluated", "failed", "reused", *again, *torch_cols,
                "default ms", "best ms", *speed_cols):
        t.add_column(col)

    def f(x):
        return "-" if x is None else f"{x:.4g}"
    torch_vals = (summ.baseline_ms, summ.compile_ms) if summ.reference else ()
    speeds = (summ.speedup, summ.speedup_compile) if summ.reference else \
        (summ.speedup_default,)
    t.add_row(summ.hardware, str(summ.evaluated), str(summ.failed), str(summ.reused),
              *again.values(), *map(f, torch_vals), f(summ.default_ms),
              f(res["best_time_ms"]), *map(f, speeds))
    console().print(t)
    if not summ.reference:
        echo(f"{summ.op} has no torch reference: the baseline is kevolve's default schedule")
    elif summ.compile_ms is None and summ.compile_error:
        echo(f"torch.compile not timed: {summ.compile_error}")
    if summ.stalled:
        why = ", ".join(f"{k} {v}" for k, v in summ.refused.most_common(6))
        echo(f"stopped at {summ.evaluated} of {budget}: the proposer had nothing new for "
             f"{STALL_ROUNDS} rounds in a row" + (f" (refused: {why})" if why else "") +
             "; --resume with another --seed, or another --proposer, goes on")
    if summ.duels:
        won = sum(d["won"] for d in summ.duels)
        echo(f"duels: {won} of {len(summ.duels)} candidates faster than the best on one "
             "timing were faster again beside it")
    conf = next((c for c in summ.confirmed if summ.best is not None
                 and c["candidate"] == summ.best.candidate_id), None)
    if conf is not None:
        echo(f"best re-timed: {conf['median_ms']:.4g} ms, the median of {conf['rounds']} "
             f"rounds (spread {100 * conf['spread']:.1f}%; its first timing "
             f"{conf['first_ms']:.4g} ms), against the {len(summ.confirmed) - 1} next "
             "fastest re-timed alike")
    if summ.best is not None:
        echo("best schedule:")
        echo(json.dumps(json.loads(summ.best.trace_json), indent=1))
    echo(f"archive: {db}")
    _exit_on_failure(summ, db)


def _exit_on_failure(summ, db: str) -> None:
    """Exit 1 when the archive holds no schedule of the op that passed on this hardware."""
    if summ.best is None:
        raise Failed(f"no schedule of {summ.op} passed on {summ.backend} ({summ.hardware}): "
                     f"{summ.evaluated} evaluated, {summ.failed} failed; `kevolve history "
                     f"{summ.op} --db {db}` lists their verdicts")
