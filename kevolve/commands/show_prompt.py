"""`kevolve show-prompt CANDIDATE`: what the model saw (and answered) for a candidate."""

from __future__ import annotations

import click

from ._common import echo, emit_json, json_option
from .archive import db_option, open_archive


@click.command("show-prompt", short_help="Print the prompt a model saw for a candidate.",
               help="Print the exchange(s) with a model that produced CANDIDATE (an id from "
               "`kevolve history`): the system text, the user prompt, each answer and the "
               "feedback on rejected ones, with the transport, model, temperature, seed, "
               "tokens and latency. A candidate no model proposed has none.")
@click.argument("candidate", type=int)
@db_option
@click.option("--full", is_flag=True, help="Print the system text too (the move grammar, "
              "the backend's facts).")
@json_option
def command(candidate: int, db: str, full: bool, as_json: bool) -> None:
    from ..archive import ArchiveError

    with open_archive(db) as a:
        cand = a.candidate(candidate)
        if cand is None:
            raise ArchiveError(f"no candidate {candidate} in archive {db} (`kevolve history "
                               "OP` lists the ids)")
        prompts = a.prompts_of(candidate)
    if as_json:
        emit_json({"candidate": candidate, "op": cand["op_name"],
                   "proposer": cand["proposer"], "prompts": prompts})
        return
    if not prompts:
        echo(f"candidate {candidate} ({cand['op_name']}) was proposed by "
             f"{cand['proposer'] or '-'}: no model saw a prompt for it")
        return
    for p in prompts:
        temp = "-" if p["temperature"] is None else f"{p['temperature']:g}"
        echo(f"== prompt {p['id']}: {p['proposer']} over {p['transport']}, model "
             f"{p['model']}, temperature {temp}, seed {p['seed']}, tokens "
             f"{p['input_tokens']} in / {p['output_tokens']} out, {p['latency_s']:.2f} s; "
             f"{p['note']}; candidates {', '.join(map(str, p['candidates']))}")
        for m in p["prompt"]:
            if m["role"] == "system" and not full:
                echo(f"-- system ({len(m['content'])} characters; --full prints it)")
                continue
            echo(f"-- {m['role']}")
            echo(m["content"])
        echo("-- answer")
        echo(p["answer"])
