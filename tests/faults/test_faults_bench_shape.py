"""Every candidate a search archives as ok was checked at the benchmark shape, the shape it
is timed at, not only those that enter the top of the population."""

from __future__ import annotations

import json

from kevolve.ops import LIBRARY
from kevolve.schedule import default_trace
from kevolve.search import Search, SearchConfig, evolve

SOFTMAX = LIBRARY["softmax"]
BENCH = {"M": 64, "N": 256}


def test_every_search_job_checks_the_benchmark_shape(faulty, tmp_path):
    s = Search(SearchConfig("softmax", "faulty", shape="small", shape_overrides=BENCH,
                            db=str(tmp_path / "a.db"), threads=1))
    assert s.job(s.default_json, 1, baseline=False, verify=False).check_bench_shape


def test_a_kernel_wrong_only_at_the_benchmark_shape_is_not_archived_as_ok(faulty, tmp_path):
    """Slower than the best so far (top_k 1), so the top-k re-check never sees it; its own
    job checks the benchmark shape (before: archived as ok)."""
    op, dims = SOFTMAX.op_for(BENCH), SOFTMAX.dims(BENCH)
    cheat = json.loads(default_trace(op, dims).to_json())
    for m in cheat["moves"]:
        if m["m"] == "launch":
            m["num_warps"] = 2 if m["num_warps"] != 2 else 1
            warps = m["num_warps"]
    (traces := tmp_path / "t.json").write_text(json.dumps([cheat]))
    summ = evolve(SearchConfig(
        "softmax", "faulty", budget=2, shape="small", shape_overrides=BENCH,
        db=str(tmp_path / "a.db"), proposer="replay", proposer_options={"path": str(traces)},
        threads=1, repeat=3, timeout_s=600, top_k=1,
        backend_options={"by_warps": {str(warps): "wrong_at_bench"},
                         "good_numel": BENCH["M"] * BENCH["N"]}))
    assert summ.evaluated == 2
    assert dict(summ.failures) == {"correctness": 1}, summ
    assert json.loads(summ.best.trace_json) != cheat
