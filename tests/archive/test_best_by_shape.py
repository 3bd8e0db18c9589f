"""Archive.best_by_shape: the fastest ok candidate per searched shape (the shape buckets
kevolve.torch chooses among)."""

from __future__ import annotations

import json

from kevolve.archive import Archive
from kevolve.evaluate.job import Result
from kevolve.ir.builder import axes, compute, dims, f32, input, op
from kevolve.schedule.trace import Trace


def _op():
    N = dims("N")
    x = input("x", (N,), f32)
    (i,) = axes("i", N)
    return op("twice", inputs=[x], outputs=[compute("y", (i,), x[i] * 2.0)])


def _trace(w: int) -> str:
    return Trace.make("twice", [{"m": "launch", "num_warps": "$W"}], {"$W": w}).to_json()


def _ok(t: float) -> Result:
    return Result("ok", time_ms=t, times_ms=(t,), baseline_ms=1.0, max_error=0.0,
                  source_hash=f"s{t}", seconds=0.1)


def test_one_record_per_shape_the_fastest_ok_one(tmp_path):
    with Archive(tmp_path / "a.db") as a:
        oid = a.op_id(_op())
        cands = [a.add_candidate(oid, _trace(w), proposer="heuristic")[0] for w in (1, 2, 4, 8)]
        small, large = {"N": 64}, {"N": 1 << 20}
        a.add_result(cands[0], "hw", "triton", {}, _ok(3.0), None, small, (0,))
        a.add_result(cands[1], "hw", "triton", {}, _ok(2.0), None, small, (0,))
        a.add_result(cands[2], "hw", "triton", {}, _ok(9.0), None, large, (0,))
        a.add_result(cands[3], "hw", "triton", {}, Result("correctness", message="x"), None,
                     large, (0,))
        a.add_result(cands[3], "hw", "cpu", {}, _ok(0.5), None, large, (0,))
        got = a.best_by_shape("twice", "triton")
        assert a.best_by_shape("twice", "cuda") == []
    by_shape = {json.dumps(r["shape"], sort_keys=True): r for r in got}
    assert len(got) == 2
    assert by_shape['{"N": 64}']["candidate_id"] == cands[1]
    assert by_shape['{"N": 1048576}']["candidate_id"] == cands[2]
    assert json.loads(by_shape['{"N": 64}']["trace_json"])["decisions"] == {"$W": 2}
