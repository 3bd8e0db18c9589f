"""`kevolve show-prompt CANDIDATE`: what the model saw (and answered) for a candidate;
`kevolve show-prompt --preview OP -b B`: what a model would see for OP now."""

from __future__ import annotations

import json

import click

from ._common import BadInput, echo, emit_json, json_option
from .archive import db_option, open_archive


@click.command("show-prompt", short_help="Print the prompt a model saw for a candidate.",
               help="Print the exchange(s) with a model that produced CANDIDATE (an id from "
               "`kevolve history`): the system text, the user prompt, each answer and the "
               "feedback on rejected ones, with the transport, model, temperature, seed, "
               "tokens and latency. A candidate no model proposed has none. With --preview "
               "OP, print instead the prompt an LLM proposer would send for OP now (from the "
               "archive's results of OP on --backend, if any), with its size.")
@click.argument("candidate", type=int, required=False)
@click.option("--preview", "preview_op", metavar="OP", default=None,
              help="The prompt a model would see for OP now (no model is asked).")
@click.option("--backend", "-b", "backend_name", default="cpu", show_default=True,
              help="--preview: the backend.")
@click.option("--shape", "preset", default="cpu", show_default=True,
              help="--preview: the shape preset being tuned.")
@click.option("--answer", type=click.Choice(["tool", "json"]), default="tool",
              show_default=True, help="--preview: answered by tool call (anthropic) or as a "
              "JSON object (openai, command).")
@db_option
@click.option("--full", is_flag=True, help="Print the system text too (the move grammar, "
              "the backend's facts).")
@json_option
def command(candidate: int | None, preview_op: str | None, backend_name: str, preset: str,
            answer: str, db: str, full: bool, as_json: bool) -> None:
    from ..archive import ArchiveError

    if preview_op is not None:
        _preview(preview_op, backend_name, preset, answer == "tool", db, as_json)
        return
    if candidate is None:
        raise BadInput("give a CANDIDATE id, or --preview OP")
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


def _preview(op_ref: str, backend_name: str, preset: str, by_tool: bool, db: str,
             as_json: bool) -> None:
    import os

    from ..api import backend
    from ..ops import resolve
    from ..search.proposers.llm.prompt import preview

    opdef = resolve(op_ref)
    opdef.shape(preset)  # an unknown preset: exit 2, naming the presets
    be = backend(backend_name)
    scored, ceilings, hw = [], {}, ""
    if os.path.exists(db):
        with open_archive(db, readonly=True) as a:
            if opdef.name in a.op_names():
                best = a.best_record(opdef.name, backend_name)
                hw = best["hardware"] if best else ""
                scored = a.scored_by_name(opdef.name, backend_name, hw or None)
                ceilings = a.ceilings(hw) if hw else {}
    doc = preview(opdef, be, preset, scored, ceilings, hw, by_tool=by_tool)
    if as_json:
        emit_json(doc)
        return
    echo(doc["system"])
    echo()
    echo(doc["user"])
    if doc["tool"]:
        echo()
        echo("tool: " + doc["tool"])
    echo()
    echo("sizes: " + json.dumps(doc["sizes"]))
