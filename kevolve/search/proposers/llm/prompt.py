"""What the claude proposer sends: the system prompt, the one tool (`propose_schedules`)
whose input schema is plain JSON Schema over kevolve's move grammar, and the user prompt
built from a ProposalContext (op IR, caps, shape class, ceilings, limits, grammar, default,
best, parents and similar ops, each result described compactly)."""

from __future__ import annotations

import json
from dataclasses import asdict, is_dataclass

from ....archive.records import Scored
from ....evaluate.job import Result
from ....schedule import MoveError, Trace
from ....schedule.moves import DECISION_PATTERN, MOVES, json_schema
from ..base import ProposalContext

TOOL = "propose_schedules"


def tool_definition(n: int | None = None) -> dict:
    """The `propose_schedules` tool, its input schema plain JSON Schema (moves items are
    kevolve.schedule.moves.json_schema(), the grammar every trace is checked against)."""
    traces = {"type": "array", "minItems": 1, "items": {
        "type": "object",
        "properties": {
            "moves": {"type": "array", "items": json_schema(), "maxItems": 64},
            "decisions": {"type": "object", "additionalProperties": {"type": "integer"},
                          "propertyNames": {"pattern": DECISION_PATTERN},
                          "description": 'values of "$NAME" references used in moves'},
            "reason": {"type": "string", "maxLength": 300,
                       "description": "one sentence: why this should be faster"},
            "parent": {"type": "integer",
                       "description": "candidate id of the trace this one modifies"},
        },
        "required": ["moves"], "additionalProperties": False}}
    if n:
        traces["maxItems"] = n
    return {"name": TOOL,
            "description": "Propose new schedules (traces of moves) for the operator. "
                           "kevolve checks each trace, generates the kernel from its own "
                           "templates, verifies it against a reference and times it.",
            "input_schema": {"type": "object", "properties": {"traces": traces},
                             "required": ["traces"], "additionalProperties": False}}


def _jsonable(x):
    if is_dataclass(x) and not isinstance(x, type):
        x = asdict(x)
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (set, frozenset)):
        return sorted(_jsonable(v) for v in x)
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def short(text, limit: int) -> str:
    """`text` on one line, cut to `limit` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _num(x, digits: int = 4):
    return float(f"{x:.{digits}g}") if isinstance(x, (int, float)) else x


def describe_result(r: Result, ceilings: dict) -> dict:
    """What a proposer should know about one evaluation, compact."""
    d = r.diagnostics or {}
    out = {"verdict": r.verdict}
    if r.time_ms is not None:
        out["time_ms"] = _num(r.time_ms)
    if r.baseline_ms:
        out["torch_eager_ms"] = _num(r.baseline_ms)
    if r.max_error is not None:
        out["max_error"] = _num(r.max_error, 3)
    if r.message:
        out["message"] = short(r.message, 600)
    bw = d.get("achieved_bytes_per_s")
    if bw:
        out["achieved_GB_per_s"] = _num(bw / 1e9)
        ceil = ceilings.get("copy_bytes_per_s")
        if ceil:
            out["pct_of_copy_ceiling"] = round(100 * bw / ceil, 1)
    flops = d.get("floor_flops")
    if flops and r.time_ms:
        out["achieved_GFLOP_per_s"] = _num(flops / (r.time_ms * 1e-3) / 1e9)
        mm = ceilings.get("matmul_flops")
        if mm:
            out["pct_of_matmul_ceiling"] = round(100 * flops / (r.time_ms * 1e-3) / mm, 1)
    comp = {k.split(".", 1)[1]: (short(v, 300) if isinstance(v, str) else v)
            for k, v in d.items() if k.startswith("compiler.")}
    if comp:
        out["compiler"] = comp
    if isinstance(d.get("error"), dict):
        out["error"] = d["error"]
    return out


def _trace_body(trace_json: str) -> dict:
    try:
        d = Trace.from_json(trace_json).to_dict()
    except MoveError:
        return {"unreadable": True}
    return {"moves": d["moves"], "decisions": d["decisions"]}


def _scored(s: Scored, ceilings: dict, with_op: bool = False) -> dict:
    out = {"candidate": s.candidate_id}
    if with_op:
        try:
            out["op"] = Trace.from_json(s.trace_json).op
        except MoveError:
            pass
    out.update(_trace_body(s.trace_json))
    out["result"] = describe_result(s.result, ceilings)
    return out


def grammar_text() -> str:
    lines = []
    for m in MOVES.values():
        args = ", ".join(f"{k}{'' if k in m.required else '?'}" for k in m.args)
        lines.append(f"- {m.name}({args}): {m.doc}")
    return "\n".join(lines)


SYSTEM = """You tune the schedule of one tensor operator for kevolve, a kernel search tool.
A schedule is a trace: a list of moves (JSON objects) applied to the operator's IR, plus
optional integer `decisions` that moves reference as "$NAME". kevolve checks every move,
lowers the schedule and writes all kernel source from its own templates, then checks the
kernel against a float64 reference on random inputs and times it.

Rules:
- You never write code. Answer only by calling the tool `propose_schedules`; each trace has
  `moves` (objects of the move grammar), optional `decisions`, a one-sentence `reason`, and
  optionally `parent` (the candidate id you modified). Anything else is rejected.
- Name stages and axes exactly as in the IR. A move that creates axes names them with
  `into` (letters, digits and _ only); later moves use those names.
- Each trace must differ from the ones shown: explore real alternatives (tile sizes,
  fusion, reduction strategy, rows per program, vector width, launch hints) guided by the
  diagnostics (time, achieved bandwidth against the ceiling, compiler messages).
- If a previous answer was rejected, read the structured errors (move_index, code,
  message, hint) and fix exactly those moves."""


def build_prompt(ctx: ProposalContext, n: int, notes: str = "") -> tuple[str, str]:
    """(system, user) text for one proposal call."""
    system = SYSTEM
    if notes:
        system += f"\n\nHardware notes for the {ctx.backend} backend:\n{notes.strip()}"
    ceil = ctx.ceilings or {}
    parts = [f"# Operator {ctx.op_name}\n{ctx.op_text.strip()}",
             f"# Backend {ctx.backend}{' (GPU)' if ctx.gpu else ''}: capabilities\n"
             + json.dumps(_jsonable(ctx.caps), sort_keys=True),
             "# Shape class being tuned (dims)\n" + json.dumps(ctx.bench_dims, sort_keys=True)]
    if ceil:
        parts.append("# Measured hardware ceilings\n" + json.dumps(
            {k: _num(v) for k, v in ceil.items()}, sort_keys=True))
    if ctx.limits:
        parts.append("# Per-program limits of this device (a trace whose estimated shared "
                     "memory or accumulator registers exceed them is rejected)\n"
                     + json.dumps(ctx.limits, sort_keys=True))
    parts.append("# Move grammar (the tool's JSON Schema has the exact argument types)\n"
                 + grammar_text())
    parts.append("# Default schedule\n" + json.dumps(_trace_body(ctx.default_trace_json)))
    if ctx.best is not None:
        parts.append("# Best so far\n" + json.dumps(_scored(ctx.best, ceil)))
    if ctx.parents:
        parts.append("# Parents to improve on (with their results and diagnostics)\n" +
                     "\n".join(json.dumps(_scored(p, ceil)) for p in ctx.parents))
    if ctx.similar:
        parts.append("# Best schedules of similar operators already in the archive (their "
                     "stage and axis names are theirs: adapt them to this IR)\n" +
                     "\n".join(json.dumps(_scored(s, ceil, with_op=True))
                               for s in ctx.similar))
    parts.append(f"# Task\n{ctx.history_size} candidates evaluated so far. Call "
                 f"`{TOOL}` once with {n} new, distinct trace(s).")
    return system, "\n\n".join(parts)
