"""The LLM proposer: schedules from any model, through a transport (transports.py).

One prompt (prompt.py), one answer parser and one retry/fall-back policy serve every
transport. The answer is `{"traces": [{"moves": [...], "decisions": {...}, "reason": "...",
"parent": ID}]}`, as a tool call (anthropic) or as the reply's JSON object (openai,
command).

Security: the model never writes code. Each proposed trace is rebuilt from its moves by
`Trace.from_dict`, replayed, lowered and checked against the backend's caps and the
device's limits here (`prove.prove`), and only the canonical `Trace.to_json()` of a trace
that passed leaves this module; kevolve's templates write all source from it. Anything
else in the answer (unknown keys such as "code", a string where moves belong) is rejected
with a structured error, and the model's `reason` is kept only as a note in the archive.

An invalid answer is sent back (the MoveError dicts) at most `max_retries` times; after
that, or when the transport fails, this call falls back to the heuristic proposer, sets
`fell_back` and `fallback_reason`, and its candidates are labelled `<name>->heuristic`.
Every exchange is archived (Archive.record_prompt: the conversation, the answer, tokens,
latency, temperature and seed), and the proposals carry the id of the exchange that
produced them so the search links candidates to it."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

from ....schedule import MoveError, Trace
from ..base import Proposal, ProposalContext, Proposer
from ..prove import Backends, prove
from .prompt import build_prompt, code_excerpt, short, tool_definition
from .transports import TransportError, make_transport

ITEM_KEYS = ("moves", "decisions", "reason", "parent")


def _err(trace: int | None, e: MoveError | dict) -> dict:
    d = e.to_dict() if isinstance(e, MoveError) else dict(e)
    d["message"] = short(d.get("message", ""), 400)
    d["hint"] = short(d.get("hint", ""), 300)
    return {"trace": trace, **d}


class LLMProposer(Proposer):
    name = "llm"
    needs_archive = True  # reads similar ops' best traces, archives its prompts

    def __init__(self, transport: str = "anthropic", model: str | None = None,
                 seed: int = 0, temperature: float = 1.0, max_retries: int = 2,
                 archive=None, max_answer_chars: int = 20000, label: str | None = None,
                 **options):
        self.transport = make_transport(transport, model=model, **options)
        self.name = label or f"llm:{self.transport.name}"
        self.model = self.transport.model
        self.seed, self.temperature = seed, float(temperature)
        self.max_retries = max(0, int(max_retries))
        self.archive = archive
        self.max_answer_chars = max_answer_chars
        from ..heuristic import HeuristicProposer
        self._heuristic = HeuristicProposer(seed=seed)
        self._backend = Backends()
        self.seen: set[str] = set()
        self.usage: list[dict] = []  # one row per exchange
        self.fell_back = False
        self.fallback_reason = ""
        self.last_errors: list[dict] = []  # the errors of the last rejected answer
        self._rejected: Counter = Counter()  # the model's traces refused, by code
        self._calls = 0

    @property
    def client(self):
        return getattr(self.transport, "client", None)

    @property
    def skipped(self) -> Counter:
        """Traces refused before evaluation, by code: the model's and, after a fall-back,
        the heuristic's."""
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
        lead = ctx.best or (ctx.parents[0] if ctx.parents else None)
        code = code_excerpt(op, lead.trace_json, ctx.bench_dims or self._dims(ctx), be) \
            if lead is not None and be is not None else ""
        system, user = build_prompt(ctx, n, be.notes() if be is not None else "",
                                    by_tool=self.transport.by_tool, code=code)
        turns: list[dict] = [{"role": "user", "text": user}]
        tool = tool_definition(n)
        known = {s.candidate_id for s in (*ctx.parents, *((ctx.best,) if ctx.best else ()))
                 if s.candidate_id is not None}
        default_parent = (ctx.best or (ctx.parents[0] if ctx.parents else None))
        default_parent = default_parent.candidate_id if default_parent else None
        # (the seed sent changes with each call, so a deterministic server does not repeat
        # itself; both are recorded)
        for attempt in range(self.max_retries + 1):
            seed = (self.seed * 1000003 + self._calls) & 0x7FFFFFFF
            self._calls += 1
            try:
                reply = self.transport.ask(system, turns, tool, self.temperature, seed)
            except TransportError as e:
                self._archive(system, turns, None, seed, f"attempt {attempt}: transport "
                              f"error: {short(e, 300)}")
                return self._fall_back(ctx, n, short(e, 300))
            props, errors = self._read(reply, op, ctx, n, known, default_parent)
            note = (f"accepted {len(props)} trace(s)" if props else
                    "rejected: " + ", ".join(sorted({e['code'] for e in errors})))
            pid = self._archive(system, turns, reply, seed, f"attempt {attempt}: {note}")
            self.last_errors = errors
            if props:
                return [replace(p, prompt_id=pid) for p in props]
            body = json.dumps({"errors": errors[:20], "accepted": 0,
                               "hint": "fix these moves and answer again"})
            turns += [{"role": "assistant", "reply": reply},
                      {"role": "feedback", "body": body, "reply": reply}]
        codes = ", ".join(sorted({e["code"] for e in self.last_errors})) or "no answer"
        return self._fall_back(ctx, n, f"{self.max_retries + 1} invalid answer(s) ({codes})")

    # -- reading an answer -------------------------------------------------------------
    def _read(self, reply, op, ctx, n, known, default_parent):
        """(proposals, errors) of one reply."""
        errors: list[dict] = [_err(None, p) for p in reply.problems]
        out: list[Proposal] = []
        dupes: list[dict] = []
        for inp in reply.answers:
            try:
                size = len(json.dumps(inp))
            except (TypeError, ValueError, RecursionError):
                size = self.max_answer_chars + 1
            if size > self.max_answer_chars:
                errors.append(_err(None, {
                    "move_index": None, "code": "answer.too_large",
                    "message": f"the answer is {size} characters, over the limit of "
                               f"{self.max_answer_chars}",
                    "hint": f"give at most {n} short traces (a trace is a few moves)"}))
                continue
            if not isinstance(inp, dict) or set(inp) != {"traces"} or \
                    not isinstance(inp["traces"], list):
                errors.append(_err(None, {
                    "move_index": None, "code": "answer.schema",
                    "message": "the answer must be {\"traces\": [...]} and nothing else",
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
                    self._rejected["semantics.unsupported"] += 1
                    continue
                key = t.to_json()
                if key in self.seen:
                    self._rejected["answer.duplicate"] += 1
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
                out.append(Proposal(key, parent, self.name, note))
        if not out:
            errors.extend(dupes)
        return out, errors

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

    def _archive(self, system: str, turns: list[dict], reply, seed: int,
                 note: str) -> int | None:
        """Record one exchange (token usage, and the prompt where the archive keeps
        prompts); the prompt row's id, or None."""
        row = {"model": (reply.model if reply else "") or self.model,
               "input_tokens": reply.tokens_in if reply else 0,
               "output_tokens": reply.tokens_out if reply else 0, "note": note}
        self.usage.append(row)
        if self.archive is None:
            return None
        self.archive.record_usage(self.name, row["model"], row["input_tokens"],
                                  row["output_tokens"], note=note)
        record = getattr(self.archive, "record_prompt", None)
        if record is None:
            return None
        messages = [{"role": "system", "content": system}]
        for t in turns:
            if t["role"] == "user":
                messages.append({"role": "user", "content": t["text"]})
            elif t["role"] == "assistant":
                messages.append({"role": "assistant", "content": t["reply"].text})
            else:
                messages.append({"role": "feedback", "content": t["body"]})
        return record(proposer=self.name, transport=self.transport.name,
                      model=row["model"], seed=seed,
                      temperature=self.temperature if self.transport.takes_temperature
                      else None,
                      input_tokens=row["input_tokens"], output_tokens=row["output_tokens"],
                      latency_s=reply.latency_s if reply else 0.0,
                      prompt=json.dumps(messages), answer=reply.text if reply else "",
                      note=note)

    @property
    def tokens(self) -> dict:
        return {"input_tokens": sum(r["input_tokens"] for r in self.usage),
                "output_tokens": sum(r["output_tokens"] for r in self.usage)}

    def _fall_back(self, ctx: ProposalContext, n: int, why: str) -> list[Proposal]:
        self.fell_back, self.fallback_reason = True, why
        note = f"{self.name} fell back to heuristic: {why}"
        self.usage.append({"model": self.model, "input_tokens": 0, "output_tokens": 0,
                           "note": note})
        if self.archive is not None:
            self.archive.record_usage(self.name, self.model, 0, 0, note=note)
        props = self._heuristic.propose(ctx, n)
        return [replace(p, proposer=f"{self.name}->heuristic",
                        note=short(f"{p.note} [{note}]", 500)) for p in props]
