"""The Ray executor on a real local Ray cluster (2 CPUs, no dashboard, temp dir under a
short /tmp path: Ray's Unix sockets must fit in ~107 characters) gives the same verdicts
and errors as the local worker pool on the same jobs; crashes and hangs become results;
map is reentrant; the cluster it started is shut down on close."""

from __future__ import annotations

import json
import shutil
import tempfile

import pytest

ray = pytest.importorskip("ray")

from kevolve.evaluate.executors import LocalExecutor, RayExecutor  # noqa: E402
from kevolve.evaluate.job import EvalJob  # noqa: E402
from kevolve.evaluate.worker import WorkerPool  # noqa: E402
from kevolve.ops import LIBRARY  # noqa: E402
from kevolve.schedule import default_trace  # noqa: E402

SOFTMAX = LIBRARY["softmax"]
SMALL = SOFTMAX.shape("small")
DEFAULT = default_trace(SOFTMAX.op, SOFTMAX.dims(SMALL))
BASE = json.loads(DEFAULT.to_json())["moves"]


def _trace(extra, decisions=None) -> str:
    return json.dumps({"version": 1, "op": "softmax", "moves": BASE + extra,
                       "decisions": decisions or {}})


TRACES = {
    "default": DEFAULT.to_json(),
    "tiled": _trace([{"m": "split", "stage": "y", "axis": "j", "size": "$BN",
                      "into": ["jo", "ji"]},
                     {"m": "vectorize", "stage": "y", "axis": "ji", "width": 8}], {"$BN": 16}),
    "online": _trace([{"m": "reduction", "stage": "s", "strategy": "online"}]),
    "illegal": _trace([{"m": "split", "stage": "y", "axis": "nope", "size": 8}]),
}


def _job(i: int, name: str) -> EvalJob:
    return EvalJob("softmax", "cpu", TRACES[name], SMALL,
                   check_shapes=({"M": 3, "N": 17},) + tuple(SOFTMAX.edge_shapes),
                   backend_options={"threads": 1}, time=False, threads=1, candidate_id=i)


JOBS = [_job(i, n) for i, n in enumerate(TRACES)]


@pytest.fixture(scope="module")
def ray_ex():
    tmp = tempfile.mkdtemp(prefix="kr", dir="/tmp")
    ex = RayExecutor(timeout_s=600, ray_init_kwargs=dict(
        num_cpus=2, include_dashboard=False, _temp_dir=tmp, log_to_driver=False))
    try:
        assert ex.started and ray.is_initialized()
        yield ex
    finally:
        ex.close()
        assert not ray.is_initialized()
        shutil.rmtree(tmp, ignore_errors=True)


def _by_candidate(pairs) -> dict:
    return {job.candidate_id: res for job, res in pairs}


def test_ray_and_local_pool_agree(ray_ex):
    with WorkerPool(2, timeout_s=600) as pool:
        local = _by_candidate(pool.map(JOBS))
    remote = _by_candidate(ray_ex.map(JOBS))
    assert set(local) == set(remote) == {j.candidate_id for j in JOBS}
    for i, name in enumerate(TRACES):
        a, b = local[i], remote[i]
        assert a.verdict == b.verdict, (name, a.message, b.message)
        if name == "illegal":
            assert a.verdict == "legality"
            assert a.diagnostics["error"]["code"] == b.diagnostics["error"]["code"] \
                == "schema.unknown_axis"
        else:
            assert a.verdict == "ok", (name, a.message)
            assert a.max_error == pytest.approx(b.max_error, rel=1e-6, abs=1e-12)
            assert a.source_hash == b.source_hash
    assert LocalExecutor is WorkerPool


def test_map_is_reentrant(ray_ex):
    outer = ray_ex.map(JOBS[:2])
    job, res = next(outer)
    inner = list(ray_ex.map([JOBS[2]]))  # like the search re-verifying a candidate
    assert [j.candidate_id for j, _ in inner] == [2] and inner[0][1].ok
    rest = list(outer)
    assert {job.candidate_id} | {j.candidate_id for j, _ in rest} == {0, 1}


def test_crash_and_timeout_become_results(ray_ex, monkeypatch):
    # Stand-ins for an evaluation that kills its worker and one that hangs (nested
    # functions travel to the workers by value).
    def crash(job):
        import os
        os._exit(7)

    def hang(job):
        import time
        time.sleep(600)

    monkeypatch.setattr(ray_ex, "timeout_s", 3.0)
    monkeypatch.setattr(ray_ex, "_remote", ray.remote(crash).options(max_retries=0))
    ((_, res),) = list(ray_ex.map(JOBS[:1]))
    assert res.verdict == "crash" and "died" in res.message
    monkeypatch.setattr(ray_ex, "_remote", ray.remote(hang).options(max_retries=0))
    ((_, res),) = list(ray_ex.map(JOBS[:1]))  # the executor's limit, not the 600 s sleep
    assert res.verdict == "timeout" and "(limit 3 s)" in res.message, res.message
    assert not ray_ex._tasks and not ray_ex._done


def test_describe_labels_results_as_the_worker_node_sees_them(ray_ex):
    d = ray_ex.describe("cpu", threads=1)
    assert d["hardware"].startswith("cpu:") and d["hardware"].endswith(":1t")
    assert "python" in d["toolchain"] and d["cpu_count"] >= 1


def test_an_executor_on_a_running_cluster_passes_env_and_leaves_the_cluster_up(ray_ex,
                                                                               tmp_path):
    cache = tmp_path / "cache"  # where the worker's builds land, if the env reached it
    ex = RayExecutor(timeout_s=600, env={"KEVOLVE_CACHE": str(cache)})
    assert not ex.started and ex.cpus_per_task == 1
    ((job, res),) = list(ex.map(JOBS[:1]))
    assert res.ok, res.message
    assert list((cache / "cpu").glob("*.so"))
    ex.close()
    assert ray.is_initialized()  # not this executor's cluster to shut down
    assert RayExecutor(timing_exclusive=True).cpus_per_task == 2  # the whole (only) node
