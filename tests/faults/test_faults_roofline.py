"""Too good to be true: a time below the roofline floor (bytes at the copy ceiling, FLOPs
at the matmul ceiling) is flagged as suspicious, timed again, and accepted as best only if
the new time is no longer below the floor; otherwise the candidate is recorded as
`suspicious`. The logic on the CPU: the pure function, `_verify` with injected results, and
a search where a kernel cheats its timing (it does nothing when called again on the same
buffers, as a timing loop does). On the H200 the same path runs with device timing and the
measured GPU ceilings; that check is still to be run there."""

from __future__ import annotations

import json

import pytest

from kevolve.archive import Archive
from kevolve.archive.records import Scored
from kevolve.evaluate.evaluator import Evaluator
from kevolve.evaluate.job import FAILURES, EvalJob, Result
from kevolve.ops import LIBRARY
from kevolve.schedule import default_trace
from kevolve.search import Search, SearchConfig, evolve
from kevolve.search.population import Population
from kevolve.search.verify import floor_ms, suspicious

CEIL = {"copy_bytes_per_s": 1e10, "matmul_flops": 1e11}  # 10 GB/s, 100 GFLOP/s
DIAG = {"floor_bytes": 10_000_000, "floor_flops": 50_000_000}  # 1 ms by bytes, 0.5 by FLOPs


def ok(ms: float, **diag) -> Result:
    return Result("ok", time_ms=ms, times_ms=(ms,) * 3, max_error=1e-7,
                  diagnostics={**DIAG, **diag})


def test_floor_is_the_larger_of_bytes_and_flops():
    assert floor_ms(ok(1.0), CEIL) == pytest.approx(1.0)
    assert floor_ms(ok(1.0, floor_flops=300_000_000), CEIL) == pytest.approx(3.0)
    assert floor_ms(Result("ok", time_ms=1.0), CEIL) is None  # nothing known
    assert floor_ms(ok(1.0), {}) is None and floor_ms(ok(1.0), {"copy_bytes_per_s": 0}) is None


def test_suspicious_only_below_slack_times_the_floor():
    assert suspicious(ok(0.5), CEIL)  # twice as fast as the bytes allow
    assert suspicious(ok(0.89), CEIL)
    assert not suspicious(ok(0.91), CEIL)  # within the slack: believable
    assert not suspicious(ok(5.0), CEIL)
    assert suspicious(ok(0.95), CEIL, slack=1.0)
    assert not suspicious(ok(0.001), CEIL, slack=0)  # slack 0: the check is off
    assert not suspicious(ok(0.001), CEIL, min_bytes=20_000_000)  # cache-resident: no floor
    assert not suspicious(Result("correctness", time_ms=0.001, diagnostics=DIAG), CEIL)
    assert not suspicious(ok(0.001), {})  # no ceilings measured: nothing to hold it against
    assert "suspicious" in FAILURES


class FakePool:
    """What _verify needs of an executor: map(jobs) -> (job, Result); records the jobs."""

    def __init__(self, *results):
        self.results, self.jobs = list(results), []

    def map(self, jobs):
        for j in jobs:
            self.jobs.append(j)
            yield j, self.results.pop(0)


@pytest.fixture(scope="module")
def search(tmp_path_factory):
    s = Search(SearchConfig("softmax", "cpu", shape="small", threads=1,
                            db=str(tmp_path_factory.mktemp("r") / "a.db"),
                            roofline_min_bytes=0))
    s.ceilings = dict(CEIL)
    return s


def first_job(search) -> EvalJob:
    return search.job(search.default_json, 7, baseline=False, verify=False)


def test_a_suspicious_time_is_timed_again_and_accepted_when_it_no_longer_is(search):
    pool = FakePool(ok(2.0))  # timed again: a believable 2 ms
    res = search._verify(pool, first_job(search), ok(0.01), Population(search.rng))
    (vjob,) = pool.jobs
    assert vjob.time and vjob.check_bench_shape and vjob.check_shapes == ()
    assert res.ok and res.time_ms == 2.0
    assert res.diagnostics["retimed"] and res.diagnostics["verified_bench_shape"]
    first = res.diagnostics["suspicious"]
    assert first["time_ms"] == 0.01 and "below 0.9 x the roofline floor 1 ms" in first["reason"]


def test_still_too_fast_when_timed_again_is_recorded_as_suspicious(search):
    pop = Population(search.rng)
    pool = FakePool(ok(0.02))
    res = search._verify(pool, first_job(search), ok(0.01), pop)
    assert res.verdict == "suspicious" and not res.ok
    assert "too fast to be true, twice" in res.message
    assert "0.01 ms is below" in res.message and "0.02 ms is below" in res.message
    pop.add(Scored(search.default_json, res))
    assert pop.best is None  # never the best


def test_a_suspicious_candidate_that_fails_its_bench_shape_check_fails(search):
    pool = FakePool(Result("correctness", message="y: 3 of 300 elements off"))
    res = search._verify(pool, first_job(search), ok(0.01), Population(search.rng))
    assert res.verdict == "correctness" and "benchmark-shape check" in res.message


def test_a_believable_time_outside_the_top_is_not_rechecked(search):
    pop = Population(search.rng)
    for k in range(4):
        pop.add(Scored(search.default_json, ok(1.0 + k)))
    pool = FakePool()
    res = search._verify(pool, first_job(search), ok(9.0), pop)
    assert res.ok and res.time_ms == 9.0 and pool.jobs == []


def test_the_cpu_check_applies_only_beyond_the_caches(tmp_path):
    s = Search(SearchConfig("softmax", "cpu", shape="small", threads=2, db=str(tmp_path / "a")))
    assert s.roofline_min_bytes >= 64 << 20  # small CPU working sets stay in cache
    s.ceilings = dict(CEIL)
    assert s.floor_ceilings()["copy_bytes_per_s"] == 1e10  # measured with the 2 threads


BIG = {"M": 1024, "N": 1024}  # 8 MB of traffic: a floor well above a Python call


def test_a_kernel_that_skips_repeated_calls_never_becomes_best(faulty, tmp_path):
    """The evaluator alone rejects it now: outputs are poisoned before every timed call and
    checked after timing, so the calls it skipped leave NaN (before, it was ok with a
    near-zero time and only the roofline check below caught it, and only at sizes beyond
    the caches). The honest default stays the best."""
    op, dims = LIBRARY["softmax"].op_for(BIG), LIBRARY["softmax"].dims(BIG)
    default = json.loads(default_trace(op, dims).to_json())
    cheat = json.loads(json.dumps(default))
    for m in cheat["moves"]:
        if m["m"] == "launch":
            m["num_warps"] = 2 if m["num_warps"] != 2 else 1
            warps = m["num_warps"]
    caught = Evaluator().evaluate(EvalJob("softmax", "faulty", json.dumps(cheat), BIG, (),
                                          (0,), {"by_warps": {str(warps): "skip_repeat"}},
                                          repeat=3, threads=1))
    assert caught.verdict == "correctness" and "after timing" in caught.message
    (traces := tmp_path / "t.json").write_text(json.dumps([cheat]))
    summ = evolve(SearchConfig(
        "softmax", "faulty", budget=2, shape="small", shape_overrides=BIG,
        db=str(tmp_path / "a.db"), proposer="replay", proposer_options={"path": str(traces)},
        threads=1, repeat=3, timeout_s=600, roofline_min_bytes=0,
        backend_options={"by_warps": {str(warps): "skip_repeat"}}))
    assert summ.evaluated == 2 and dict(summ.failures) == {"correctness": 1}
    assert summ.best is not None and json.loads(summ.best.trace_json) == default
    with Archive(tmp_path / "a.db", create=False) as a:
        assert json.loads(a.best("softmax", "faulty").trace_json) == default
