"""How an LLM proposer reaches a model: one small interface, three transports.

A transport turns a conversation (the system text, then user, assistant and feedback turns)
into one `Reply`: the answer objects it found (tool inputs, or the JSON object of a text
answer), the text to archive, the model that answered and the tokens it counted. It never
judges an answer: the proposer (proposer.py) parses and proves every trace the same way
whatever the transport, and owns retries and the fall-back.

- `anthropic`: the Messages API through the anthropic SDK (extra `llm`), the answer as a
  forced tool call;
- `openai`: any OpenAI-compatible chat-completions server (a hosted model, vLLM,
  llama.cpp, Ollama), on the standard library's urllib; the answer is the reply's JSON
  object;
- `command`: any program: it reads the request as JSON on stdin and writes the answer
  (`{"traces": [...]}`) on stdout (an external agent, a person at a terminal, a test
  double);
- `recorded`: the answers of an archived transcript (the prompts table), in order: a
  model's search replayed offline, for comparisons at equal budget and tokens.

Settings come from options, then from the environment, read once when a transport is made
(the command line's edge): KEVOLVE_OPENAI_BASE_URL (or OPENAI_BASE_URL), KEVOLVE_OPENAI_MODEL,
OPENAI_API_KEY, KEVOLVE_PROPOSER_COMMAND, ANTHROPIC_API_KEY."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from ....errors import MissingExtra, SetupError


class TransportError(Exception):
    """The model could not be asked (network, server, program failure): the proposer falls
    back for this call."""


class TransportSetupError(SetupError):
    """A transport lacks what it needs to start (a key, a model, a command)."""


@dataclass
class Reply:
    answers: list = field(default_factory=list)  # answer objects (tool inputs / parsed JSON)
    text: str = ""  # the answer as archived
    model: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    problems: list = field(default_factory=list)  # why an answer could not be read (dicts)
    state: Any = None  # the transport's own, to send the turn back (anthropic: blocks)
    latency_s: float = 0.0

    def take(self, obj, problem: dict | None) -> None:
        """One parsed answer (json_object's pair): kept as an answer, or its problem."""
        if problem:
            self.problems.append(problem)
        else:
            self.answers.append(obj)


def approx_tokens(text: str) -> int:
    """About 4 characters a token: a count for transports that report none."""
    return (len(text) + 3) // 4


def json_object(text: str) -> tuple[object | None, dict | None]:
    """The JSON object in a text answer (fenced or bare, chatter around it allowed), or a
    structured problem."""
    t = text.strip()
    if t.startswith("```"):
        t = t.split("\n", 1)[1] if "\n" in t else ""
        t = t.rsplit("```", 1)[0]
    try:
        return json.loads(t), None
    except ValueError:
        pass
    a, b = t.find("{"), t.rfind("}")
    if 0 <= a < b:
        try:
            return json.loads(t[a:b + 1]), None
        except ValueError:
            pass
    return None, {"move_index": None, "code": "answer.not_json",
                  "message": "the answer holds no JSON object",
                  "hint": 'answer with one JSON object {"traces": [...]} and nothing else'}


def _plain_messages(system: str, turns: list[dict]) -> list[dict]:
    """The conversation as chat messages of text (openai, command)."""
    out = [{"role": "system", "content": system}]
    for t in turns:
        if t["role"] == "user":
            out.append({"role": "user", "content": t["text"]})
        elif t["role"] == "assistant":
            out.append({"role": "assistant", "content": t["reply"].text or "(no answer)"})
        else:
            out.append({"role": "user", "content": f"Your answer was rejected: {t['body']}. "
                        "Answer again with one JSON object {\"traces\": [...]} only."})
    return out


# -- anthropic ------------------------------------------------------------------------------

def _anthropic():
    try:
        import anthropic
    except ImportError as e:
        raise MissingExtra("the anthropic transport needs the anthropic SDK: "
                           "pip install 'kevolve[llm]'") from e
    return anthropic


class AnthropicTransport:
    name = "anthropic"
    by_tool = True  # the answer is a forced tool call
    DEFAULT_MODEL = "claude-sonnet-4-6"

    def __init__(self, model: str | None = None, client=None, max_tokens: int = 4096,
                 env=None, **_):
        env = os.environ if env is None else env
        self.model = model or self.DEFAULT_MODEL
        self.max_tokens = max_tokens
        anthropic = _anthropic()
        self._api_error = (anthropic.APIError,)
        if client is None:
            if not (env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN")):
                raise TransportSetupError(
                    "the anthropic transport needs ANTHROPIC_API_KEY in the environment "
                    "(or use --transport openai/command, or --proposer heuristic)")
            client = anthropic.Anthropic()
        self.client = client
        # Recent SDKs (and models) take no temperature: sent only where it is a parameter,
        # and recorded as None where it was not sent.
        try:
            import inspect
            params = inspect.signature(client.messages.create).parameters
            self.takes_temperature = "temperature" in params
        except (TypeError, ValueError, AttributeError):
            self.takes_temperature = False

    def ask(self, system: str, turns: list[dict], tool: dict, temperature: float,
            seed: int) -> Reply:
        from .prompt import TOOL
        messages: list[dict] = []
        for t in turns:
            if t["role"] == "user":
                messages.append({"role": "user", "content": t["text"]})
            elif t["role"] == "assistant":
                messages.append({"role": "assistant", "content": t["reply"].state["blocks"]})
            else:
                calls = t["reply"].state["calls"]
                if not calls:
                    messages.append({"role": "user", "content": f"Your answer was rejected: "
                                     f"{t['body']}. Call {TOOL} with moves only."})
                else:  # every tool call gets its result; the errors go with the first
                    messages.append({"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": cid, "is_error": True,
                         "content": t["body"] if k == 0 else
                         '{"errors": [], "note": "see the first result"}'}
                        for k, cid in enumerate(calls)]})
        t0 = time.perf_counter()
        try:
            resp = self.client.messages.create(
                model=self.model, max_tokens=self.max_tokens, system=system,
                messages=messages, tools=[tool],
                tool_choice={"type": "tool", "name": tool["name"]},
                **({"temperature": temperature} if self.takes_temperature else {}))
        except Exception as e:  # API down, auth, rate limits past the SDK's retries
            kind = "API error" if isinstance(e, self._api_error) else "client error"
            raise TransportError(f"{kind}: {type(e).__name__}: {e}") from e
        latency = time.perf_counter() - t0
        blocks = [b for b in (resp.content or [])]
        calls = [b for b in blocks if getattr(b, "type", None) == "tool_use"]
        reply = Reply(model=getattr(resp, "model", None) or self.model, latency_s=latency)
        u = getattr(resp, "usage", None)
        reply.tokens_in = int(getattr(u, "input_tokens", 0) or 0)
        reply.tokens_out = int(getattr(u, "output_tokens", 0) or 0)
        if not calls:
            reply.problems.append({"move_index": None, "code": "answer.no_tool_call",
                                   "message": "the answer did not call " + tool["name"],
                                   "hint": f"answer only by calling {tool['name']}; never "
                                           "write code or plain-text traces"})
        for c in calls:
            if c.name != tool["name"]:
                reply.problems.append({"move_index": None, "code": "answer.unknown_tool",
                                       "message": f"unknown tool {str(c.name)[:40]!r}",
                                       "hint": f"call {tool['name']}"})
            else:
                reply.answers.append(c.input)
        texts = [b.text for b in blocks if getattr(b, "type", None) == "text"]
        try:
            reply.text = json.dumps([{"text": x} for x in texts] +
                                    [{"tool": c.name, "input": c.input} for c in calls])
        except (TypeError, ValueError):
            reply.text = repr(texts)
        sent = []
        for b in blocks:
            if b.type == "text":
                sent.append({"type": "text", "text": b.text})
            elif b.type == "tool_use":
                sent.append({"type": "tool_use", "id": b.id, "name": b.name,
                             "input": b.input if isinstance(b.input, dict) else {}})
        reply.state = {"blocks": sent or [{"type": "text", "text": "(no answer)"}],
                       "calls": [c.id for c in calls]}
        return reply


# -- OpenAI-compatible chat completions ----------------------------------------------------

class OpenAITransport:
    name = "openai"
    by_tool = False
    takes_temperature = True  # the answer is a JSON object in the reply's text

    def __init__(self, model: str | None = None, base_url: str | None = None,
                 api_key: str | None = None, max_tokens: int = 4096,
                 timeout_s: float = 300.0, json_mode: bool = True, env=None, **_):
        env = os.environ if env is None else env
        self.base_url = (base_url or env.get("KEVOLVE_OPENAI_BASE_URL")
                         or env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1")
        self.base_url = self.base_url.rstrip("/")
        self.model = model or env.get("KEVOLVE_OPENAI_MODEL") or ""
        if not self.model:
            raise TransportSetupError("the openai transport needs a model: --model NAME or "
                                      "KEVOLVE_OPENAI_MODEL in the environment")
        self.api_key = api_key if api_key is not None else env.get("OPENAI_API_KEY", "")
        self.max_tokens, self.timeout_s, self.json_mode = max_tokens, timeout_s, json_mode

    def ask(self, system: str, turns: list[dict], tool: dict, temperature: float,
            seed: int) -> Reply:
        body = {"model": self.model, "messages": _plain_messages(system, turns),
                "temperature": temperature, "seed": seed, "max_tokens": self.max_tokens}
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        headers = {"Content-Type": "application/json"}
        if self.api_key:  # (a local server may need none)
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(f"{self.base_url}/chat/completions",
                                     data=json.dumps(body).encode(), headers=headers,
                                     method="POST")
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                data = json.loads(r.read().decode("utf-8", "replace"))
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")[:300] if e.fp else ""
            raise TransportError(f"HTTP {e.code} from {self.base_url}: {detail}") from e
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise TransportError(f"{type(e).__name__} from {self.base_url}: {e}") from e
        latency = time.perf_counter() - t0
        try:
            text = data["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as e:
            raise TransportError(f"no choices[0].message.content in the reply of "
                                 f"{self.base_url}") from e
        usage = data.get("usage") or {}
        reply = Reply(text=text, model=data.get("model") or self.model, latency_s=latency,
                      tokens_in=int(usage.get("prompt_tokens") or 0),
                      tokens_out=int(usage.get("completion_tokens") or 0))
        reply.take(*json_object(text))
        return reply


# -- any program -----------------------------------------------------------------------------

class CommandTransport:
    """The request on stdin: `{"system", "messages": [{"role", "content"}], "tool", "n",
    "model", "temperature", "seed"}`; the answer on stdout: `{"traces": [...]}`, optionally
    with `"usage": {"input_tokens", "output_tokens"}` (else counted as characters / 4)."""

    name = "command"
    by_tool = False
    takes_temperature = True

    def __init__(self, command: str | list | None = None, model: str | None = None,
                 timeout_s: float = 600.0, env=None, **_):
        env = os.environ if env is None else env
        command = command or env.get("KEVOLVE_PROPOSER_COMMAND")
        if not command:
            raise TransportSetupError("the command transport needs a program: --command "
                                      "'PROGRAM ARGS' or KEVOLVE_PROPOSER_COMMAND")
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        self.model = model or os.path.basename(self.argv[0])
        self.timeout_s = timeout_s

    def ask(self, system: str, turns: list[dict], tool: dict, temperature: float,
            seed: int) -> Reply:
        n = tool["input_schema"]["properties"]["traces"].get("maxItems")
        request = {"system": system, "messages": _plain_messages(system, turns)[1:],
                   "tool": tool, "n": n, "model": self.model, "temperature": temperature,
                   "seed": seed}
        stdin = json.dumps(request)
        t0 = time.perf_counter()
        try:
            p = subprocess.run(self.argv, input=stdin, capture_output=True, text=True,
                               timeout=self.timeout_s)
        except (OSError, subprocess.SubprocessError) as e:
            raise TransportError(f"{self.argv[0]}: {type(e).__name__}: {e}") from e
        latency = time.perf_counter() - t0
        if p.returncode != 0:
            raise TransportError(f"{self.argv[0]} exited {p.returncode}: "
                                 f"{p.stderr.strip()[-300:]}")
        reply = Reply(text=p.stdout, model=self.model, latency_s=latency)
        obj, problem = json_object(p.stdout)
        usage = obj.pop("usage", None) if isinstance(obj, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        reply.tokens_in = int(usage.get("input_tokens") or approx_tokens(stdin))
        reply.tokens_out = int(usage.get("output_tokens") or approx_tokens(p.stdout))
        reply.take(obj, problem)
        return reply


# -- recorded answers -------------------------------------------------------------------------

class RecordedTransport:
    """Answers from a transcript: the `prompts` rows of an archive (oldest first, of one
    proposer label if given), handed out in order, with the tokens and latency recorded
    then. It replays a model's search offline, so that a comparison at equal budget (and
    equal tokens) can be run again on other hardware or against another proposer; each
    answer is parsed and proven again against the context of now. Exhausted: a transport
    error (the proposer falls back for the rest)."""

    name = "recorded"
    takes_temperature = True

    def __init__(self, transcripts: str | None = None, proposer: str | None = None,
                 model: str | None = None, env=None, **_):
        import sqlite3
        env = os.environ if env is None else env
        path = transcripts or env.get("KEVOLVE_TRANSCRIPTS")
        if not path or not os.path.isfile(path):
            raise TransportSetupError("the recorded transport needs --transcripts ARCHIVE "
                                      f"(an archive with a prompts table); got {path!r}")
        where, args = ("WHERE proposer = ? AND answer != ''", (proposer,)) if proposer else \
            ("WHERE answer != ''", ())
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
                self.rows = c.execute(
                    "SELECT transport, model, input_tokens, output_tokens, latency_s, answer "
                    f"FROM prompts {where} ORDER BY id", args).fetchall()
        except sqlite3.Error as e:
            raise TransportSetupError(f"cannot read transcripts from {path}: {e}") from e
        self.model = model or (self.rows[0][1] if self.rows else "recorded")
        self.by_tool = False
        self.at = 0

    def ask(self, system: str, turns: list[dict], tool: dict, temperature: float,
            seed: int) -> Reply:
        if self.at >= len(self.rows):
            raise TransportError(f"transcript exhausted after {len(self.rows)} answer(s)")
        transport, model, tin, tout, latency, answer = self.rows[self.at]
        self.at += 1
        reply = Reply(text=answer, model=model, tokens_in=tin, tokens_out=tout,
                      latency_s=latency)
        obj, problem = json_object(answer)
        if transport == "anthropic" and isinstance(obj, list):  # [{"tool", "input"}, ...]
            calls = [b["input"] for b in obj if isinstance(b, dict) and "tool" in b]
            reply.answers.extend(calls)
            if not calls:
                reply.problems.append({"move_index": None, "code": "answer.no_tool_call",
                                       "message": "the recorded answer called no tool",
                                       "hint": ""})
        else:
            reply.take(obj, problem)
        return reply


TRANSPORTS = {"anthropic": AnthropicTransport, "openai": OpenAITransport,
              "command": CommandTransport, "recorded": RecordedTransport}


def make_transport(name: str, **options):
    """Transport `name` with its options (unknown ones ignored: they belong to others)."""
    if name not in TRANSPORTS:
        from ....errors import UnknownName
        raise UnknownName(f"unknown transport {name!r}; use {', '.join(sorted(TRANSPORTS))}")
    return TRANSPORTS[name](**options)
