"""The CPU timer: a short call is timed until its calls add up to a minimum duration, and a
result keeps the medians of groups of them, in order."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from kevolve.evaluate import timing


def test_a_short_call_is_timed_until_its_calls_add_up_to_min_ms():
    calls = []

    def call():
        calls.append(1)
        time.sleep(0.0002)
    out = timing.time_cpu(call, warmup=2, repeat=5, min_ms=4.0)
    assert len(out) > 5 and sum(out) >= 4.0  # 5 calls of >= 0.2 ms: 1 ms; more follow
    assert len(calls) == len(out) + 2
    assert len(timing.time_cpu(lambda: None, repeat=5)) == 5  # no minimum: exactly repeat


def test_a_long_call_is_timed_repeat_times_and_the_count_is_capped(monkeypatch):
    out = timing.time_cpu(lambda: time.sleep(0.002), warmup=0, repeat=3, min_ms=1.0)
    assert len(out) == 3 and all(t >= 2.0 for t in out)
    monkeypatch.setattr(timing, "MAX_CALLS", 40)
    assert len(timing.time_cpu(lambda: None, warmup=0, repeat=3, min_ms=1e9)) == 40


def test_prepare_runs_before_every_call_untimed():
    seen = []
    timing.time_cpu(lambda: seen.append("call"), warmup=1, repeat=3,
                    prepare=lambda: seen.append("prep"))
    assert seen == ["prep", "call"] * 4


@given(st.lists(st.floats(0.01, 100), min_size=1, max_size=300), st.integers(1, 40))
def test_chunk_medians_keep_the_order_and_the_range(xs, n):
    got = timing.chunk_medians(xs, n)
    assert len(got) == min(n, len(xs))
    assert min(xs) <= min(got) and max(got) <= max(xs)
    if n >= len(xs):
        assert got == xs  # one call per group: nothing summarised
    rising = sorted(xs)
    got = timing.chunk_medians(rising, n)
    assert got == sorted(got)
