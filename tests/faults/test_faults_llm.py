"""Bad answers from the LLM, through the anthropic SDK on a fake HTTP transport (the
helpers of tests/search/test_claude_proposer.py, which covers each kind of bad answer on its
own: text only, unknown moves and axes, huge, code in seven shapes, bounded retries, API
errors). Here: a tool input that is not JSON at all, and a whole search whose every answer
is bad in a different way: it finishes its budget on the heuristic fallback, says so in the
archive, and no text of the model reaches a compiler, in any worker."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

pytest.importorskip("anthropic")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "search"))
from test_claude_proposer import (  # noqa: E402
    BASE,
    CUDA_CODE,
    GOOD,
    FakeAPI,
    _ctx,
    _follow_up_result,
    proposer,
    text_answer,
    tool_answer,
)

from kevolve.search import SearchConfig, evolve  # noqa: E402

MARK = "KEVOLVE_INJECTED"


def test_a_tool_input_that_is_not_json_is_fed_back_then_retried():
    api = FakeAPI(tool_answer('{"traces": [{"moves": [split y j 16 vectorize'),
                  tool_answer({"traces": GOOD[:1]}, n=2))
    p = proposer(api)
    props = p.propose(_ctx(), 1)
    assert len(props) == 1 and not p.fell_back
    block = _follow_up_result(api.requests[1])
    assert block["is_error"] and json.loads(block["content"])["errors"][0]["code"] == \
        "answer.schema"


BAD = [
    text_answer(f"Sure! Here is a faster kernel:\n```cuda\n{CUDA_CODE}\n```"),  # not JSON
    tool_answer('{"traces": [{"moves": "__global__ void k() { /* KEVOLVE_INJECTED */ }"'),
    tool_answer({"traces": [{"moves": BASE + [{"m": "teleport", "stage": "y"}]}]}),
    tool_answer({"traces": [{"moves": BASE + [{"m": "split", "stage": "y", "axis": "zz",
                                               "size": 8}]}]}),
    tool_answer({"traces": [dict(GOOD[0], reason="x" * 400)] * 120}),  # huge
    tool_answer({"traces": [dict(GOOD[0], code=CUDA_CODE)]}),  # code beside the moves
]
CODES = ["answer.no_tool_call", "answer.schema", "schema.unknown_move", "schema.unknown_axis",
         "answer.too_large", "schema.unknown_key"]


def test_a_search_on_bad_answers_falls_back_and_says_so_in_the_archive(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("KEVOLVE_CACHE", str(cache))  # workers inherit it: every build lands here
    api = FakeAPI(*(BAD * 6))
    db = tmp_path / "a.db"
    summ = evolve(SearchConfig(
        "softmax", "cpu", budget=3, shape="small", db=str(db), threads=1, repeat=3,
        timeout_s=600, proposer="claude",
        proposer_options={"client": api.client(), "max_retries": 5}))
    assert summ.evaluated + summ.reused == 3 and summ.best is not None

    # one call: six answers (one try + five retries), each rejected with its error fed back
    first_call = api.requests[:6]
    for req, code in zip(first_call[1:], CODES):
        msg = req["messages"][-1]["content"]
        text = msg if isinstance(msg, str) else msg[0]["content"]
        assert code in text, (code, text[:300])
    with sqlite3.connect(db) as c:
        cands = c.execute("SELECT proposer, note, trace_json FROM candidates").fetchall()
        usage = [r[0] for r in c.execute("SELECT note FROM usage ORDER BY id")]
    fell = [(note, tj) for who, note, tj in cands if who == "claude->heuristic"]
    assert len(fell) == 2 and all(p in ("seed", "claude->heuristic") for p, _, _ in cands)
    for note, _ in fell:
        # the last answer's errors say why; the usage table has every attempt's
        assert "claude fell back to heuristic: 6 invalid answer(s) (schema.unknown_key)" in note
    assert usage[:7] == [f"attempt {k}: rejected: {code}" for k, code in enumerate(CODES)] + \
        [usage[6]] and usage[6].startswith("claude fell back to heuristic")
    assert not any(MARK in tj or "__global__" in tj for _, _, tj in cands)
    # what the workers compiled: kevolve's own sources, none carrying the model's text
    sources = list(cache.rglob("*.c"))
    assert sources
    for src in sources:
        text = src.read_text()
        assert MARK not in text and "__global__" not in text and "curl" not in text
