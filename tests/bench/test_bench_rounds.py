"""The bench's interleaved rounds: every contestant runs right after every other equally
often (a Williams design), a contestant whose timing fails is reported and left out, and
the kernel picked among the finalists is timed on the build it was picked with."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kevolve
from kevolve.bench import suites
from kevolve.bench.runner import bench_op
from kevolve.evaluate.timing import interleaved, orders
from kevolve.ops import LIBRARY
from kevolve.schedule import default_trace


@given(st.integers(1, 12))
def test_every_contestant_follows_every_other_equally_often(n):
    rows = orders(n, 2 * n)
    assert all(sorted(row) == list(range(n)) for row in rows)
    period = n if n % 2 == 0 else 2 * n
    pairs = Counter((a, b) for row in rows[:period] for a, b in zip(row, row[1:]))
    want = 1 if n % 2 == 0 else 2
    assert set(pairs) == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert all(count == want for count in pairs.values())
    # and each starts a round equally often
    assert Counter(row[0] for row in rows[:period]) == {i: period // n for i in range(n)}


@given(st.integers(0, 6), st.integers(1, 7))
def test_rounds_beyond_the_design_repeat_it(n, rounds):
    rows = orders(n, rounds)
    assert len(rows) == rounds and all(len(r) == n for r in rows)
    if n:
        assert rows[0] == orders(n, 1)[0]


def test_interleaved_times_each_call_once_a_round_in_that_order():
    seen = []
    calls = {k: (lambda k=k: seen.append(k)) for k in "abcd"}
    times = interleaved(calls, 4, lambda fn: (fn(), 1.0)[1])
    assert times == {k: [1.0] * 4 for k in "abcd"}
    # a warm-up timing of the first round's first call, then the rounds
    assert seen[0] == seen[1] == "abcd"[orders(4, 4)[0][0]]
    assert [seen[i:i + 4] for i in range(1, 17, 4)] == \
        [["abcd"[i] for i in row] for row in orders(4, 4)]
    assert seen[1:5] != seen[5:9]  # not a fixed order


def test_the_warm_up_timing_is_dropped():
    clock = iter(range(100))
    times = interleaved({"a": lambda: None, "b": lambda: None}, 2, lambda fn: next(clock))
    assert sorted(times["a"] + times["b"]) == [1, 2, 3, 4]  # 0 was the warm-up


def test_a_failing_timing_is_reported_once_and_not_timed_again():
    def boom():
        raise RuntimeError("launch failed")
    failed = []
    times = interleaved({"ok": lambda: None, "bad": boom}, 3,
                        lambda fn: (fn(), 2.0)[1], lambda k, e: failed.append((k, str(e))))
    assert times == {"ok": [2.0] * 3, "bad": []}
    assert failed == [("bad", "launch failed")]
    with pytest.raises(RuntimeError, match="launch failed"):
        interleaved({"bad": boom}, 2, lambda fn: fn())


def test_no_contender_is_built_twice(monkeypatch):
    # benched at the small preset: the count of builds does not depend on the size
    monkeypatch.setitem(suites.PRESET, "cpu", "small")
    d = LIBRARY["softmax"]
    sd = d.shape("small")
    trace = default_trace(d.op_for(sd), d.dims(sd)).to_json()
    real, built = kevolve.build, []

    def counting(k, be):
        built.append(k)
        return real(k, be)
    monkeypatch.setattr(kevolve, "build", counting)
    row = bench_op("softmax", "cpu", "cpu", gpu=False,
                   ceilings={"copy_bytes_per_s": 1e10, "matmul_flops": 1e11},
                   compile_=False, also=(), repeat=2, rounds=2,
                   contenders=((7, trace), (9, trace), (11, trace), (13, trace)))
    # 4 contenders built once each: timed once, the 3 fastest again in the finalist rounds,
    # and the winner's build reused for the main rounds
    assert len(built) == 4
    assert row["candidate"] in (7, 9, 11, 13) and row["kevolve_verdict"] == "ok"
    assert sum("finalist_ms" in c for c in row["contenders"]) == 3
    assert row["kevolve_ms"] > 0 and row["eager_ms"] > 0
