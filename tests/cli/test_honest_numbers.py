"""Figures the command line prints are measured in the run that prints them: torch eager
beside the kernel it is compared with, CPU ceilings with the threads the kernels use."""

from __future__ import annotations

import sqlite3

from kevolve.evaluate.hardware import measure_ceilings
from kevolve.search import Search, SearchConfig, evolve


def cfg(tmp_path, **kw) -> SearchConfig:
    base = dict(op="softmax", backend="cpu", budget=2, shape="small",
                db=str(tmp_path / "a.db"), threads=1, repeat=3, timeout_s=120)
    return SearchConfig(**{**base, **kw})


def test_speedup_never_uses_an_archived_eager_time(tmp_path):
    evolve(cfg(tmp_path))
    with sqlite3.connect(tmp_path / "a.db") as c:  # an eager time from another day
        c.execute("update results set baseline_ms = 1000.0")
    again = evolve(cfg(tmp_path, budget=1))
    assert again.baseline_ms is not None and again.baseline_ms < 1000.0
    assert again.paired_ms is not None and again.paired_ms > 0
    assert again.speedup == again.baseline_ms / again.paired_ms
    assert again.to_json()["paired_ms"] == again.paired_ms


def test_cpu_ceilings_are_measured_with_the_kernels_threads(monkeypatch):
    seen = []
    import kevolve.evaluate.hardware as hw

    monkeypatch.setattr(hw, "cpu_copy_bandwidth", lambda t: seen.append(t) or 1e9)
    got = measure_ceilings(False, threads=2)
    assert seen == [2] and got["copy_threads"] == 2 and got["copy_bytes_per_s"] == 1e9


def test_copy_bandwidth_with_threads_is_a_rate():
    from kevolve.evaluate.hardware import cpu_copy_bandwidth

    assert cpu_copy_bandwidth(2, n=1 << 20) > 0


def test_the_roofline_check_uses_the_measured_ceiling_as_it_is(tmp_path):
    s = Search(cfg(tmp_path, threads=4))
    s.ceilings = {"copy_bytes_per_s": 10e9, "matmul_flops": 1e11, "copy_threads": 4}
    assert s.floor_ceilings()["copy_bytes_per_s"] == 10e9  # not 4 x: it is 4 threads' already


def test_old_single_thread_ceilings_are_measured_again(tmp_path, monkeypatch):
    import kevolve.evaluate.hardware as hw
    from kevolve.archive import Archive

    s = Search(cfg(tmp_path))
    with Archive(str(tmp_path / "a.db")) as a:
        a.set_ceiling(s.hardware, "copy_bytes_per_s", 1.0)  # as an older kevolve stored them
        a.set_ceiling(s.hardware, "matmul_flops", 1.0)
    calls = []
    monkeypatch.setattr(hw, "measure_ceilings", lambda gpu, threads=None: calls.append(
        threads) or {"copy_bytes_per_s": 5e9, "matmul_flops": 5e10, "copy_threads": threads})
    evolve(cfg(tmp_path, budget=1, refresh=0))
    assert calls == [1]
    with Archive(str(tmp_path / "a.db")) as a:
        assert a.ceilings(s.hardware)["copy_bytes_per_s"] == 5e9
