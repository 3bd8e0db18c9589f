"""The `claude` proposer: schedules from Claude through the anthropic SDK (extra `llm`).

The prompt carries the op's IR text, the backend's caps, the move grammar, the shape class
being tuned, the parents with their results and diagnostics, the best so far, and retrieved
context (kevolve's hardware notes for the backend, and the best traces of similar ops from
the archive: similar.py). The answer comes through one tool, `propose_schedules` (prompt.py),
whose input schema is plain JSON Schema:
`{"traces": [{"moves": [...], "decisions": {...}, "reason": "..."}]}`.

Security: the model never writes code. Each proposed trace is rebuilt from its moves by
`Trace.from_dict`, replayed with `apply_trace`, lowered and checked against the backend's
caps and the device's limits here (`prove.prove`), and only the canonical
`Trace.to_json()` of a trace that passed leaves this module; kevolve's templates write all
source from it. Anything else in the answer (text blocks, unknown keys such as "code", a
string where moves belong) is rejected with a structured error, and the model's `reason`
is kept only as a note in the archive.

An invalid answer is sent back in a follow-up turn (a `tool_result` with `is_error: true`
carrying the MoveError dicts) at most `max_retries` times; after that, or on an API error,
this call falls back to the heuristic proposer, sets `fell_back` and `fallback_reason`, and
the search labels the candidates `claude->heuristic`."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import replace

from ....errors import MissingExtra, SetupError
from ....schedule import MoveError, Trace
from ..base import Proposal, ProposalContext, Proposer
from ..prove import Backends, prove
from .prompt import TOOL, build_prompt, short, tool_definition

DEFAULT_MODEL = "claude-sonnet-4-6"
ITEM_KEYS = ("moves", "decisions", "reason", "parent")


class ClaudeSetupError(SetupError):
    """The proposer cannot talk to the API (no key)."""


def _anthropic():
    try:
        import anthropic
    except ImportError as e:
        raise MissingExtra("the claude proposer needs the anthropic SDK: "
                           "pip install 'kevolve[llm]'") from e
    return anthropic


def _err(trace: int | None, e: MoveError | dict) -> dict:
    d = e.to_dict() if isinstance(e, MoveError) else dict(e)
    d["message"] = short(d.get("message", ""), 400)
    d["hint"] = short(d.get("hint", ""), 300)
    return {"trace": trace, **d}


class ClaudeProposer(Proposer):
    name = "claude"
    needs_archive = True  # reads similar ops' best traces, records token usage

    def __init__(self, model: str = DEFAULT_MODEL, seed: int = 0, max_retries: int = 2,
                 client=None, archive=None, max_answer_chars: int = 20000,
                 max_tokens: int = 4096, **_):
        self.model = model or DEFAULT_MODEL
        self.seed = seed
        self.max_retries = max(0, int(max_retries))
        self.archive = archive
        self.max_answer_chars = max_answer_chars
        self.max_tokens = max_tokens
        anthropic = _anthropic()
        self._api_error = (anthropic.APIError,)
        if client is None:
            # The key is read here, once, at the edge (the SDK's default: ANTHROPIC_API_KEY).
            if not (os.environ.get("ANTHROPIC_API_KEY") or
                    os.environ.get("ANTHROPIC_AUTH_TOKEN")):
                raise ClaudeSetupError("the claude proposer needs ANTHROPIC_API_KEY in the "
                                       "environment (or use --proposer heuristic)")
            client = anthropic.Anthropic()
        self.client = client
        from ..heuristic import HeuristicProposer
        self._heuristic = HeuristicProposer(seed=seed)
        self._backend = Backends()
        self.seen: set[str] = set()
        self.usage: list[dict] = []  # one row per API response
        self.fell_back = False
        self.fallback_reason = ""
        self.last_errors: list[dict] = []  # the errors of the last rejected answer
        self._rejected: Counter = Counter()  # the model's traces refused, by MoveError code

    @property
    def skipped(self) -> Counter:
        """Traces refused before evaluation, by code: the model's and, after a fall-back,
        the heuristic's (the search reports the `resources.*` ones)."""
        return self._rejected + self._heuristic.skipped

    # -- the interface -----------------------------------------------------------------
    def propose(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        self.fell_back, self.fallback_reason, self.last_errors = False, "", []
        n = max(1, n)
        op = self._op(ctx)
        if op is None:
            return self._fall_back(ctx, n, f"{ctx.op_name} cannot be resolved")
        for s in (*ctx.parents, *((ctx.best,) if ctx.best else ())):
            self._see(s.trace_json)
        self._see(ctx.default_trace_json)
        be = self._backend(ctx.backend)
        system, user = build_prompt(ctx, n, be.notes() if be is not None else "")
        messages: list[dict] = [{"role": "user", "content": user}]
        tools = [tool_definition(n)]
        known = {s.candidate_id for s in (*ctx.parents, *((ctx.best,) if ctx.best else ()))
                 if s.candidate_id is not None}
        default_parent = (ctx.best or (ctx.parents[0] if ctx.parents else None))
        default_parent = default_parent.candidate_id if default_parent else None
        for attempt in range(self.max_retries + 1):
            try:
                resp = self.client.messages.create(
                    model=self.model, max_tokens=self.max_tokens, system=system,
                    messages=messages, tools=tools,
                    tool_choice={"type": "tool", "name": TOOL})
            except Exception as e:  # API down, auth, rate limits past the SDK's retries
                kind = "API error" if isinstance(e, self._api_error) else "client error"
                return self._fall_back(ctx, n, f"{kind}: {type(e).__name__}: "
                                       f"{short(e, 300)}")
            props, errors, calls = self._read(resp, op, ctx, n, known, default_parent)
            self._record(resp, attempt, f"accepted {len(props)} trace(s)" if props else
                         "rejected: " + ", ".join(sorted({e['code'] for e in errors})))
            if props:
                self.last_errors = errors
                return props
            self.last_errors = errors
            messages.append({"role": "assistant", "content": _blocks(resp)})
            messages.append({"role": "user", "content": _feedback(errors, calls)})
        codes = ", ".join(sorted({e["code"] for e in self.last_errors})) or "no answer"
        return self._fall_back(ctx, n, f"{self.max_retries + 1} invalid answer(s) ({codes})")

    # -- reading an answer -------------------------------------------------------------
    def _read(self, resp, op, ctx, n, known, default_parent):
        """(proposals, errors, tool_use ids) of one response."""
        calls = [b for b in (resp.content or []) if getattr(b, "type", None) == "tool_use"]
        errors: list[dict] = []
        if not calls:
            errors.append(_err(None, {"move_index": None, "code": "answer.no_tool_call",
                                      "message": "the answer did not call " + TOOL,
                                      "hint": f"answer only by calling {TOOL}; never write "
                                              "code or plain-text traces"}))
            return [], errors, []
        out: list[Proposal] = []
        dupes: list[dict] = []
        for call in calls:
            if call.name != TOOL:
                errors.append(_err(None, {"move_index": None, "code": "answer.unknown_tool",
                                          "message": f"unknown tool {short(call.name, 40)!r}",
                                          "hint": f"call {TOOL}"}))
                continue
            try:
                size = len(json.dumps(call.input))
            except (TypeError, ValueError, RecursionError):
                size = self.max_answer_chars + 1
            if size > self.max_answer_chars:
                errors.append(_err(None, {
                    "move_index": None, "code": "answer.too_large",
                    "message": f"the answer is {size} characters, over the limit of "
                               f"{self.max_answer_chars}",
                    "hint": f"give at most {n} short traces (a trace is a few moves)"}))
                continue
            inp = call.input
            if not isinstance(inp, dict) or set(inp) != {"traces"} or \
                    not isinstance(inp["traces"], list):
                errors.append(_err(None, {
                    "move_index": None, "code": "answer.schema",
                    "message": "the tool input must be {\"traces\": [...]} and nothing else",
                    "hint": 'give {"traces": [{"moves": [...], "decisions": {}, '
                            '"reason": "..."}]}'}))
                continue
            for i, item in enumerate(inp["traces"]):
                try:
                    t = self._check(item, op, ctx)
                except MoveError as e:
                    errors.append(_err(i, e))
                    self._rejected[e.code] += 1
                    continue
                except Exception as e:  # lowering met something it does not support
                    errors.append(_err(i, {"move_index": None, "code": "semantics.unsupported",
                                           "message": f"{type(e).__name__}: {e}",
                                           "hint": "try a different structure"}))
                    continue
                key = t.to_json()
                if key in self.seen:
                    dupes.append(_err(i, {"move_index": None, "code": "answer.duplicate",
                                          "message": "this trace was already proposed or "
                                                     "evaluated",
                                          "hint": "change a tile size, a strategy or the "
                                                  "structure"}))
                    continue
                if len(out) >= n:
                    continue
                self.seen.add(key)
                parent = item.get("parent")
                parent = parent if isinstance(parent, int) and parent in known \
                    else default_parent
                reason = item.get("reason")
                note = short(reason, 300) if isinstance(reason, str) else ""
                # The model's reason is a note in the archive, nothing more.
                out.append(Proposal(key, parent, self.name, note))
        if not out:
            errors.extend(dupes)
        return out, errors, [c.id for c in calls]

    def _check(self, item, op, ctx: ProposalContext) -> Trace:
        """A trace from one answer item, proven legal for this op, shape class and backend,
        and within the device's limits. Raises MoveError for anything else."""
        if not isinstance(item, dict):
            raise MoveError(None, "schema.not_object", "each trace must be a JSON object",
                            '{"moves": [...], "decisions": {}, "reason": "..."}')
        extra = sorted(str(k) for k in item if k not in ITEM_KEYS)
        if extra:
            raise MoveError(None, "schema.unknown_key", f"unknown key(s) "
                            f"{short(', '.join(extra), 80)} in a trace",
                            "give only moves, decisions, reason and parent: kevolve writes "
                            "all code from the moves")
        if "moves" not in item:
            raise MoveError(None, "schema.moves", "a trace needs moves", "")
        t = Trace.from_dict({"version": 1, "op": op.name, "moves": item["moves"],
                             "decisions": item.get("decisions") or {}})
        prove(op, t, ctx.bench_dims or self._dims(ctx), self._backend(ctx.backend),
              ctx.limits)
        return t

    # -- helpers -----------------------------------------------------------------------
    def _op(self, ctx: ProposalContext):
        from ..heuristic import _variant_for, opdef_of
        opdef = opdef_of(ctx)
        return _variant_for(opdef, ctx) if opdef is not None else None

    def _dims(self, ctx):
        from ..heuristic import opdef_of
        return opdef_of(ctx).dims("small")

    def _see(self, trace_json: str) -> None:
        try:
            self.seen.add(Trace.from_json(trace_json).to_json())
        except MoveError:
            pass

    def _record(self, resp, attempt: int, note: str) -> None:
        u = getattr(resp, "usage", None)
        row = {"model": getattr(resp, "model", None) or self.model,
               "input_tokens": int(getattr(u, "input_tokens", 0) or 0),
               "output_tokens": int(getattr(u, "output_tokens", 0) or 0),
               "note": f"attempt {attempt}: {note}"}
        self.usage.append(row)
        if self.archive is not None:
            self.archive.record_usage(self.name, row["model"], row["input_tokens"],
                                      row["output_tokens"], note=row["note"])

    @property
    def tokens(self) -> dict:
        return {"input_tokens": sum(r["input_tokens"] for r in self.usage),
                "output_tokens": sum(r["output_tokens"] for r in self.usage)}

    def _fall_back(self, ctx: ProposalContext, n: int, why: str) -> list[Proposal]:
        self.fell_back, self.fallback_reason = True, why
        note = f"claude fell back to heuristic: {why}"
        self.usage.append({"model": self.model, "input_tokens": 0, "output_tokens": 0,
                           "note": note})
        if self.archive is not None:
            self.archive.record_usage(self.name, self.model, 0, 0, note=note)
        props = self._heuristic.propose(ctx, n)
        return [replace(p, proposer=f"{self.name}->heuristic",
                        note=short(f"{p.note} [{note}]", 500)) for p in props]


def _blocks(resp) -> list[dict]:
    """The assistant turn to send back: its text and tool calls, rebuilt as plain dicts."""
    out = []
    for b in resp.content or []:
        if b.type == "text":
            out.append({"type": "text", "text": b.text})
        elif b.type == "tool_use":
            out.append({"type": "tool_use", "id": b.id, "name": b.name,
                        "input": b.input if isinstance(b.input, dict) else {}})
    return out or [{"type": "text", "text": "(no answer)"}]


def _feedback(errors: list[dict], calls: list[str]) -> list[dict] | str:
    body = json.dumps({"errors": errors[:20], "accepted": 0,
                       "hint": "fix these moves and call the tool again"})
    if not calls:
        return f"Your answer was rejected: {body}. Call {TOOL} with moves only."
    # Every tool call gets its result; the errors go with the first.
    return [{"type": "tool_result", "tool_use_id": cid, "is_error": True,
             "content": body if k == 0 else '{"errors": [], "note": "see the first result"}'}
            for k, cid in enumerate(calls)]
