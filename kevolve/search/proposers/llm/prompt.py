"""What an LLM proposer sends, whatever the transport: the system text (rules, the move
grammar once, one line a move, how to answer, the backend's facts), the compact
`propose_schedules` tool (for transports that answer by tool call), and the user text built
from a ProposalContext: the op's IR, caps, shape class, hardware and its measured ceilings
(on CPUs measured with the kernels' threads), the default and best schedules with their
results (time, % of the roofline floor, compiler report), an excerpt of the source the best
lowers to, the other parents, the latest failures with their structured errors, the
fastest few so far and the best schedules of similar ops."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, is_dataclass

from ....archive.records import Scored
from ....evaluate.job import Result
from ....schedule import MoveError, Trace
from ....schedule.moves import DECISION_PATTERN, MOVES
from ..base import ProposalContext

TOOL = "propose_schedules"


def tool_definition(n: int | None = None) -> dict:
    """The `propose_schedules` tool, compact: the move grammar goes once in the system text
    (grammar_text), so the schema only frames the answer; every move is checked against
    kevolve.schedule.moves.json_schema() when the trace is rebuilt."""
    traces = {"type": "array", "minItems": 1, "items": {
        "type": "object",
        "properties": {
            "moves": {"type": "array", "maxItems": 64,
                      "items": {"type": "object", "required": ["m"]}},
            "decisions": {"type": "object", "additionalProperties": {"type": "integer"},
                          "propertyNames": {"pattern": DECISION_PATTERN}},
            "reason": {"type": "string", "maxLength": 300},
            "parent": {"type": "integer"},
        },
        "required": ["moves"], "additionalProperties": False}}
    if n:
        traces["maxItems"] = n
    return {"name": TOOL,
            "description": "Propose new schedules (traces of moves, grammar in the system "
                           "text) for the operator.",
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
    """What a proposer should know about one evaluation, compact: the time, how far it is
    from the roofline floor (the binding ceiling named), the compiler's report and the
    structured error."""
    from ...verify import floor_ms
    d = r.diagnostics or {}
    out = {"verdict": r.verdict}
    if r.time_ms is not None:
        out["time_ms"] = _num(r.time_ms)
    if r.baseline_ms:
        out["torch_eager_ms"] = _num(r.baseline_ms)
    if r.max_error is not None:
        out["max_error"] = _num(r.max_error, 3)
    if r.message:
        out["message"] = short(r.message, 400)
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
    fl = floor_ms(r, ceilings) if r.time_ms else None
    if fl:
        out["pct_of_roofline"] = round(100 * fl / r.time_ms, 1)
    comp = {k.split(".", 1)[1]: (short(v, 200) if isinstance(v, str) else v)
            for k, v in d.items() if k.startswith("compiler.")}
    if comp:
        out["compiler"] = comp
    if isinstance(d.get("error"), dict):
        out["error"] = {k: (short(v, 300) if isinstance(v, str) else v)
                        for k, v in d["error"].items()}
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


def _dumps(x) -> str:
    return json.dumps(x, separators=(",", ":"))


def _arg_type(f: dict) -> str:
    """A JSON Schema fragment of a move argument, in a few characters."""
    if "enum" in f:
        return "|".join(map(str, f["enum"]))
    if "oneOf" in f or "anyOf" in f:
        return "|".join(_arg_type(x) for x in f.get("oneOf") or f["anyOf"])
    t = f.get("type")
    if t == "array":
        return f"[{_arg_type(f.get('items', {}))}]"
    if t == "integer":
        return "pow2|$D" if f.get("pow2") else "int|$D"
    if t == "string":
        return "name" if f.get("pattern") else "str"
    return str(t or "any")


def grammar_text() -> str:
    """The move grammar, one line a move: `name(arg:type, optional?:type): what it does`;
    `$D` is a `$NAME` reference into `decisions`."""
    lines = []
    for m in MOVES.values():
        args = ", ".join(f"{k}{'' if k in m.required else '?'}:{_arg_type(v)}"
                         for k, v in m.args.items())
        lines.append(f"- {m.name}({args}): {m.doc}")
    return "\n".join(lines)


SYSTEM = """You tune the schedule of one tensor operator for kevolve, a kernel search tool.
A schedule is a trace: a list of moves (JSON objects {"m": NAME, ...args}) applied to the
operator's IR, plus optional integer `decisions` that moves reference as "$NAME". kevolve
checks every move, lowers the schedule and writes all kernel source from its own templates,
then checks the kernel against a float64 reference on random inputs and times it.

Rules:
- You never write code. Each trace has `moves`, optional `decisions`, a one-sentence
  `reason`, and optionally `parent` (the candidate id you modified). Anything else is
  rejected.
- Name stages and axes exactly as in the IR. A move that creates axes names them with
  `into` (letters, digits and _ only); later moves use those names.
- Each trace must differ from those shown: explore real alternatives guided by the
  evidence (times against the roofline, compiler reports, the failures and their errors).
- If an answer was rejected, read the structured errors (trace, move_index, code, message,
  hint) and fix exactly those moves.

Move grammar (`?` optional; `$D` a "$NAME" decision; `name` letters, digits, _):
"""

ANSWER_TOOL = "Answer only by calling the tool `propose_schedules`."
ANSWER_JSON = ('Answer with one JSON object and nothing else: {"traces": [{"moves": [...], '
               '"decisions": {...}, "reason": "...", "parent": ID}]}.')


def build_prompt(ctx: ProposalContext, n: int, notes: str = "", by_tool: bool = True,
                 code: str = "") -> tuple[str, str]:
    """(system, user) text for one proposal call. `by_tool`: the answer is a tool call
    (else a JSON object in the reply); `code`: an excerpt of the source the best
    schedule lowers to."""
    system = SYSTEM + grammar_text() + "\n\n" + (ANSWER_TOOL if by_tool else ANSWER_JSON)
    if notes:
        system += f"\n\nFacts about the {ctx.backend} backend:\n{notes.strip()}"
    ceil = ctx.ceilings or {}
    caps = {k: v for k, v in _jsonable(ctx.caps).items() if v not in (None, False, [], {}, "")}
    parts = [f"# Operator {ctx.op_name}\n{ctx.op_text.strip()}",
             f"# Backend {ctx.backend}{' (GPU)' if ctx.gpu else ''}: capabilities\n"
             + _dumps(dict(sorted(caps.items()))),
             "# Shape class being tuned (dims)\n" + _dumps(ctx.bench_dims)]
    hw = {"hardware": ctx.hardware} if ctx.hardware else {}
    if ceil:
        hw.update({k: _num(v) for k, v in sorted(ceil.items())})
        if not ctx.gpu and ceil.get("copy_threads"):
            hw["note"] = (f"ceilings measured with {ceil['copy_threads']} thread(s), the "
                          "threads the kernels run with")
    if hw:
        parts.append("# Hardware (measured ceilings: bytes read+written/s, FLOP/s)\n"
                     + _dumps(hw))
    if ctx.limits:
        parts.append("# Per-program limits of this device (a trace whose estimated shared "
                     "memory or accumulator registers exceed them is rejected)\n"
                     + _dumps(ctx.limits))
    best_is_default = ctx.best is not None and \
        _trace_body(ctx.best.trace_json) == _trace_body(ctx.default_trace_json)
    if not best_is_default:
        parts.append("# Default schedule\n" + _dumps(_trace_body(ctx.default_trace_json)))
    if ctx.best is not None:
        parts.append("# Best so far" + (" (the default schedule)" if best_is_default else "")
                     + "\n" + _dumps(_scored(ctx.best, ceil)))
    if code:
        parts.append("# Source the best schedule lowers to (excerpt)\n" + code)
    others = [p for p in ctx.parents if ctx.best is None
              or p.candidate_id != ctx.best.candidate_id]
    if others:
        parts.append("# Other parents (results and diagnostics)\n" +
                     "\n".join(_dumps(_scored(p, ceil)) for p in others))
    if ctx.failures:
        parts.append("# Recent failures (with their structured errors)\n" +
                     "\n".join(_dumps(_scored(p, ceil)) for p in ctx.failures))
    best_id = ctx.best.candidate_id if ctx.best is not None else None
    top = [s for s in ctx.top if s.candidate_id != best_id]
    if top:
        parts.append("# Fastest schedules of this op so far\n" +
                     "\n".join(_dumps({"candidate": s.candidate_id,
                                        **_trace_body(s.trace_json),
                                        "time_ms": _num(s.result.time_ms)})
                                for s in top))
    if ctx.similar:
        parts.append("# Best schedules of similar operators in the archive (their stage "
                     "and axis names are theirs: adapt them to this IR)\n" +
                     "\n".join(_dumps(_scored(s, ceil, with_op=True)) for s in ctx.similar))
    parts.append(f"# Task\n{ctx.history_size} candidates evaluated so far. Give {n} new, "
                 "distinct trace(s).")
    return system, "\n\n".join(parts)


KERNEL_DEF = re.compile(r"\b(def|void)\s+k_\w+\s*\(")  # kevolve names its kernels k_<stage>


def code_excerpt(op, trace_json: str, dims: dict, backend, max_lines: int = 80,
                 max_chars: int = 4000) -> str:
    """The first lines of the source `trace_json` lowers to on `backend` (the kernel, not
    the whole file where it is long); "" where it does not lower."""
    from .... import pipeline
    try:
        text = pipeline.compile(op, Trace.from_json(trace_json), dims, backend).source.text
    except Exception:  # the excerpt is evidence, never a reason to fail a proposal
        return ""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # from the first kernel on: includes and helpers are the same for every candidate
    start = next((i for i, ln in enumerate(lines) if KERNEL_DEF.search(ln)), 0)
    if start and lines[start - 1].lstrip().startswith(("@", "__global__", "template")):
        start -= 1
    lines = lines[start:]
    out = "\n".join(lines[:max_lines])[:max_chars]
    if len(lines) > max_lines or len(out) < len("\n".join(lines)):
        out += "\n... (cut)"
    return out


def preview(opdef, backend, preset: str, scored: list, ceilings: dict, hardware: str = "",
            n: int = 4, by_tool: bool = True) -> dict:
    """The prompt a model would see for `opdef` on `backend` now, from archived results
    (`scored`: Scored of this op on the backend, oldest first; may be empty): system, user,
    tool, and their sizes in characters and approximate tokens (4 characters a token)."""
    from dataclasses import asdict as _asdict

    from ....ir.printer import op_text
    from ....schedule import default_trace
    from ..base import ProposalContext
    dims = opdef.dims(preset)
    op = opdef.op_for(opdef.shape(preset))
    default = default_trace(op, dims).to_json()
    ok = sorted((s for s in scored if s.result.ok and s.result.time_ms),
                key=lambda s: s.result.time_ms)
    failed = [s for s in scored if not s.result.ok][-3:]
    best = ok[0] if ok else None
    ctx = ProposalContext(opdef.ref, op_text(op), backend.name, _asdict(backend.caps),
                          default, tuple(ok[:1]), best, len(scored), 0, dims,
                          backend.target.on_device, ceilings, failures=tuple(failed),
                          top=tuple(ok[:3]), hardware=hardware)
    code = code_excerpt(op, (best.trace_json if best else default), dims, backend)
    system, user = build_prompt(ctx, n, backend.notes(), by_tool=by_tool, code=code)
    tool = json.dumps(tool_definition(n)) if by_tool else ""
    sizes = {"system_chars": len(system), "user_chars": len(user), "tool_chars": len(tool)}
    total = sum(sizes.values())
    sizes.update(total_chars=total, approx_tokens=(total + 3) // 4,
                 tool_share=round(len(tool) / total, 3) if total else 0.0)
    return {"system": system, "user": user, "tool": tool, "sizes": sizes}
