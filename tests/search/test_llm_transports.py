"""The LLM proposer over its three transports, each against a local stub: a loopback HTTP
server speaking OpenAI's chat completions, a small python program for the command
transport, and a fake anthropic client. One parser and one retry policy serve all three:
the same bad answer gets the same structured error back, whatever the transport; every
exchange lands in the archive's prompts table with the candidates it produced."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import SimpleNamespace

import pytest

from kevolve.archive import Archive
from kevolve.archive.records import Scored
from kevolve.backends.registry import get as get_backend
from kevolve.evaluate.job import Result
from kevolve.ir.printer import op_text
from kevolve.ops import LIBRARY
from kevolve.plan import lower
from kevolve.schedule import Trace, apply_trace, default_trace
from kevolve.search.proposers import make
from kevolve.search.proposers.base import ProposalContext
from kevolve.search.proposers.llm.prompt import build_prompt, tool_definition
from kevolve.search.proposers.llm.transports import (
    CommandTransport,
    OpenAITransport,
    TransportSetupError,
    json_object,
)

SOFTMAX = LIBRARY["softmax"]
DIMS = SOFTMAX.dims("small")
DEFAULT = default_trace(SOFTMAX.op, DIMS)
BASE = json.loads(DEFAULT.to_json())["moves"]
GOOD = {"traces": [
    {"moves": BASE + [{"m": "reduction", "stage": "s", "strategy": "online"}],
     "reason": "one pass for max and sum"}]}
BAD = {"traces": [{"moves": BASE + [{"m": "teleport", "stage": "y"}]}]}


def _ctx() -> ProposalContext:
    parent = Scored(DEFAULT.to_json(), Result("ok", time_ms=0.05, diagnostics={
        "achieved_bytes_per_s": 2.4e9, "floor_bytes": 2400}), candidate_id=1)
    failed = Scored(json.dumps({"version": 1, "op": "softmax", "moves": BASE + [
        {"m": "split", "stage": "y", "axis": "j", "size": 64, "tail": "guard"}],
        "decisions": {}}), Result("legality", message="extent must be a multiple of 64",
                                  diagnostics={"error": {"move_index": 5, "code":
                                                         "semantics.tail"}}), candidate_id=2)
    second = Scored(json.dumps({"version": 1, "op": "softmax", "moves": BASE + [
        {"m": "reduction", "stage": "s", "strategy": "online"}], "decisions": {}}),
        Result("ok", time_ms=0.07), candidate_id=3)
    return ProposalContext("softmax", op_text(SOFTMAX.op), "cpu",
                           asdict(get_backend("cpu").caps), DEFAULT.to_json(), (parent,),
                           parent, 2, 7, DIMS, False,
                           {"copy_bytes_per_s": 1e10, "matmul_flops": 1e11,
                            "copy_threads": 2}, failures=(failed,), top=(parent, second),
                           hardware="test-cpu")


class ChatServer:
    """A loopback OpenAI-compatible server: answers in order, records requests."""

    def __init__(self, *answers, status=200):
        self.answers, self.requests, self.status = list(answers), [], status
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body,
                                        "auth": self.headers.get("Authorization")})
                if server.status != 200:
                    self.send_response(server.status)
                    self.end_headers()
                    self.wfile.write(b'{"error": "overloaded"}')
                    return
                text = server.answers.pop(0)
                out = json.dumps({"model": body["model"], "choices": [{"message": {
                    "role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": 321, "completion_tokens": 45}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server_factory():
    made = []

    def make_server(*answers, **kw):
        s = ChatServer(*answers, **kw)
        made.append(s)
        return s
    yield make_server
    for s in made:
        s.close()


def _legal(trace_json: str) -> None:
    lower(apply_trace(SOFTMAX.op, Trace.from_json(trace_json)), DIMS)


def test_openai_transport_over_loopback(server_factory, tmp_path):
    srv = server_factory("Sure:\n```json\n" + json.dumps(BAD) + "\n```",
                         json.dumps(GOOD))
    with Archive(tmp_path / "a.db") as a:
        p = make("llm", archive=a, transport="openai", model="local-model",
                 base_url=srv.url, api_key="k", seed=5, temperature=0.3)
        props = p.propose(_ctx(), 2)
        assert len(props) == 1 and not p.fell_back and props[0].proposer == "llm:openai"
        _legal(props[0].trace_json)
        first, second = srv.requests
        assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer k"
        body = first["body"]
        assert body["model"] == "local-model" and body["temperature"] == 0.3
        assert isinstance(body["seed"], int) and body["seed"] != second["body"]["seed"]
        assert body["messages"][0]["role"] == "system"
        assert "JSON object" in body["messages"][0]["content"]  # not a tool call
        # the rejected answer goes back with its structured error
        back = second["body"]["messages"]
        assert back[2]["role"] == "assistant" and "teleport" in back[2]["content"]
        assert back[3]["role"] == "user" and "schema.unknown_move" in back[3]["content"]
        # both exchanges archived; the accepted one linked to its candidate
        cid, _ = a.add_candidate(a.op_id(SOFTMAX.op), props[0].trace_json)
        a.link_prompt(props[0].prompt_id, cid)
        (row,) = a.prompts_of(cid)
        assert row["transport"] == "openai" and row["model"] == "local-model"
        assert row["temperature"] == 0.3 and row["input_tokens"] == 321
        assert row["output_tokens"] == 45 and row["latency_s"] >= 0
        assert row["candidates"] == [cid] and row["answer"] == json.dumps(GOOD)
        assert [m["role"] for m in row["prompt"]] == ["system", "user", "assistant",
                                                     "feedback"]


def test_openai_transport_reads_settings_from_the_environment(server_factory):
    env = {"KEVOLVE_OPENAI_BASE_URL": "http://h:1/v1", "KEVOLVE_OPENAI_MODEL": "m",
           "OPENAI_API_KEY": "secret"}
    t = OpenAITransport(env=env)
    assert (t.base_url, t.model, t.api_key) == ("http://h:1/v1", "m", "secret")
    with pytest.raises(TransportSetupError, match="KEVOLVE_OPENAI_MODEL"):
        OpenAITransport(env={})


def test_openai_server_error_falls_back_to_the_heuristic(server_factory):
    srv = server_factory(status=503)
    p = make("llm", transport="openai", model="m", base_url=srv.url)
    props = p.propose(_ctx(), 2)
    assert p.fell_back and "HTTP 503" in p.fallback_reason
    assert props and all(x.proposer == "llm:openai->heuristic" for x in props)


STUB = r'''
import json, sys
req = json.load(sys.stdin)
log = sys.argv[1]
with open(log, "a") as f:
    f.write(json.dumps(req) + "\n")
n = sum(1 for _ in open(log))
answers = json.loads(sys.argv[2])
print(json.dumps(answers[min(n, len(answers)) - 1]))
'''


def _stub(tmp_path, *answers) -> tuple[str, object]:
    prog = tmp_path / "agent.py"
    prog.write_text(STUB)
    log = tmp_path / "requests.jsonl"
    return [sys.executable, str(prog), str(log), json.dumps(list(answers))], log


def test_command_transport_reads_stdin_answers_stdout(tmp_path):
    argv, log = _stub(tmp_path, BAD, {**GOOD, "usage": {"input_tokens": 9,
                                                        "output_tokens": 3}})
    p = make("llm", transport="command", command=argv, seed=1)
    props = p.propose(_ctx(), 1)
    assert len(props) == 1 and not p.fell_back and props[0].proposer == "llm:command"
    _legal(props[0].trace_json)
    reqs = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(reqs) == 2 and reqs[0]["n"] == 1 and reqs[0]["tool"]["name"]
    assert "Move grammar" in reqs[0]["system"] and reqs[0]["messages"][0]["role"] == "user"
    assert "schema.unknown_move" in reqs[1]["messages"][-1]["content"]
    assert p.usage[-1]["input_tokens"] == 9 and p.usage[0]["input_tokens"] > 100  # approx


def test_command_failure_falls_back(tmp_path):
    p = make("llm", transport="command", command=[sys.executable, "-c",
                                                   "import sys; sys.exit(3)"])
    props = p.propose(_ctx(), 1)
    assert p.fell_back and "exited 3" in p.fallback_reason and props


def test_command_transport_needs_a_program():
    with pytest.raises(TransportSetupError, match="KEVOLVE_PROPOSER_COMMAND"):
        CommandTransport(env={})


class FakeMessages:
    """What the anthropic transport needs of a client: messages.create."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    def create(self, **kw):
        self.calls.append(kw)
        inp = self.answers.pop(0)
        block = SimpleNamespace(type="tool_use", id=f"t{len(self.calls)}",
                                name=kw["tool_choice"]["name"], input=inp)
        return SimpleNamespace(content=[block], model="fake-claude",
                               usage=SimpleNamespace(input_tokens=10, output_tokens=2))


def test_anthropic_transport_with_a_fake_client_shares_the_parser():
    pytest.importorskip("anthropic")
    msgs = FakeMessages(BAD, GOOD)
    p = make("llm", transport="anthropic", client=SimpleNamespace(messages=msgs))
    props = p.propose(_ctx(), 1)
    assert len(props) == 1 and props[0].proposer == "llm:anthropic" and not p.fell_back
    follow = msgs.calls[1]["messages"][-1]["content"][0]
    assert follow["type"] == "tool_result" and "schema.unknown_move" in follow["content"]


def test_prompt_carries_the_evidence_compactly():
    ctx = _ctx()
    system, user = build_prompt(ctx, 2, get_backend("cpu").notes(), by_tool=False,
                                code="void kernel(float* y) {}")
    assert system.count("- split(") == 1 and "- compute_at(" in system
    assert '"hardware":"test-cpu"' in user and "measured with 2 thread(s)" in user
    assert '"pct_of_roofline"' in user  # time against the binding ceiling
    assert "Recent failures" in user and '"code":"semantics.tail"' in user
    assert "Fastest schedules" in user and '"candidate":3' in user and "void kernel" in user
    assert "# Default schedule" not in user  # the best is the default: said once
    assert len(json.dumps(tool_definition(2))) < 1000  # the grammar is not in the schema


def test_json_object_reads_fenced_and_chatty_answers():
    assert json_object('```json\n{"traces": []}\n```')[0] == {"traces": []}
    assert json_object('Here: {"traces": [1]} done')[0] == {"traces": [1]}
    obj, problem = json_object("no json here")
    assert obj is None and problem["code"] == "answer.not_json"


def test_recorded_transport_replays_an_archived_transcript(server_factory, tmp_path):
    """A model's answers, archived by one search, answer another offline, in order, with
    the tokens recorded then; exhausted, the proposer falls back."""
    srv = server_factory(json.dumps(BAD), json.dumps(GOOD))
    db = tmp_path / "a.db"
    with Archive(db) as a:
        p = make("llm", archive=a, transport="openai", model="m", base_url=srv.url)
        assert len(p.propose(_ctx(), 1)) == 1
    again = make("llm", transport="recorded", transcripts=str(db))
    (prop,) = again.propose(_ctx(), 1)  # the bad answer, fed back, then the good one
    _legal(prop.trace_json)
    assert [u["input_tokens"] for u in again.usage] == [321, 321]
    assert again.propose(_ctx(), 1) and again.fell_back
    assert "exhausted" in again.fallback_reason
    with pytest.raises(TransportSetupError, match="transcripts"):
        make("llm", transport="recorded", transcripts=str(tmp_path / "none.db"))
