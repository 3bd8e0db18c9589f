"""`kevolve bench` checks the outputs its timed calls left, for the reported kernel and for
every archive contender: a kernel right on its first call but not when called repeatedly
gets no time and no speedup, and the row says why."""

from __future__ import annotations

import pytest

import kevolve
from kevolve.bench.runner import bench_op
from kevolve.ops import LIBRARY
from kevolve.schedule import default_trace

CEILINGS = {"copy_bytes_per_s": 1e10, "matmul_flops": 1e11}


def _bench(monkeypatch, fault: str, contenders=()):
    from faulty_backend import FaultyBackend

    real = kevolve.backend
    monkeypatch.setattr(kevolve, "backend", lambda name, **o: FaultyBackend(
        fault=fault, threads=1) if name == "faulty" else real(name, **o))
    return bench_op("softmax", "cpu", "faulty", gpu=False, ceilings=CEILINGS,
                    compile_=False, also=(), repeat=2, rounds=2, contenders=contenders)


@pytest.fixture
def trace():
    d = LIBRARY["softmax"]
    sd = d.shape("cpu")
    return default_trace(d.op_for(sd), d.dims(sd)).to_json()


def test_an_honest_kernel_is_timed(faulty, monkeypatch):
    row = _bench(monkeypatch, "none")
    assert row["kevolve_verdict"] == "ok" and row["kevolve_ms"] > 0
    assert row["speedup_eager"] > 0


def test_a_kernel_wrong_after_timing_gets_no_time(faulty, monkeypatch, trace):
    row = _bench(monkeypatch, "accumulate_repeat", contenders=((7, trace), (9, trace)))
    # each contender passed its first check, then was timed and found wrong
    assert [c["verdict"] for c in row["contenders"]] == ["wrong", "wrong"]
    assert all(c["ms"] is None and c["message"].startswith("after timing:")
               for c in row["contenders"])
    assert row["kevolve_verdict"] == "wrong"
    assert row["kevolve_message"].startswith("after timing:")
    assert row["kevolve_max_error"] > 0.01
    assert "kevolve_ms" not in row and "speedup_eager" not in row and "pct_floor" not in row
    assert row["eager_ms"] > 0  # the baselines are still reported
