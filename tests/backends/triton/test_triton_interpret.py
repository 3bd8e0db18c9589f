"""The Triton backend in interpreter mode (TRITON_INTERPRET=1, CPU torch tensors) against
the reference interpreter: every library op with its default schedule at `small` and every
edge shape, a non-default schedule per op family, 3 seeds each (backend_checks.check).

Triton's interpreter is a process-wide mode fixed when triton is first imported, so the
cases run in a subprocess (triton_interpret_driver.py) started once per session; a case
that kills that process (a segfault from an out-of-bounds load) is recorded as a failure of
that case and the driver restarts with the cases after it."""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import backend_checks as bc
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
DRIVER = HERE / "triton_interpret_driver.py"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None,
    reason="needs triton and torch")

KNOWN: dict[str, str] = {}  # id -> reason, for a known emitter bug (strict xfail)

DEFAULTS = bc.default_cases()
VARIANTS = bc.variant_cases()
GUARD = {"id": "guard/softmax", "op": "softmax", "shape": {"M": 6, "N": 50},
         "call_shape": {"M": 6, "N": 100}}


# A driver that prints nothing for this long is stuck on a case and is killed (then treated
# like a crash on that case). Generous: the slowest case takes about 10 CPU-seconds, and a
# loaded machine may give the driver a small share of a core; a limit on the whole run
# would instead fail on a busy machine.
STALL_S = 600


def _driver(pending: list[dict], env: dict) -> tuple[int, list[str], str]:
    """One driver process over `pending`: (return code, stdout lines, stderr)."""
    with tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen([sys.executable, str(DRIVER)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=REPO)
        p.stdin.write(json.dumps(pending))
        p.stdin.close()
        lines: queue.Queue = queue.Queue()

        def read():
            for line in p.stdout:
                lines.put(line)
            lines.put(None)
        threading.Thread(target=read, daemon=True).start()
        out = []
        try:
            while (line := lines.get(timeout=STALL_S)) is not None:
                out.append(line)
        except queue.Empty:
            p.kill()
        rc = p.wait()
        err.seek(0)
        return rc, out, err.read()


def run_driver(jobs: list[dict]) -> dict[str, dict]:
    """Results by job id; restarts the driver after a job that killed or stalled it."""
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join([str(REPO), str(HERE.parent),  # + backend_checks
                                          os.environ.get("PYTHONPATH", "")]))
    results: dict[str, dict] = {}
    pending = list(jobs)
    while pending:
        rc, out, stderr = _driver(pending, env)
        lines = [json.loads(x) for x in out if x.startswith("{")]
        results.update({r["id"]: r for r in lines if "id" in r})
        left = [j for j in pending if j["id"] not in results]
        if rc == 0 or not left:
            break
        how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
        if {"ready": True} not in lines:  # died before the first case: no use retrying
            if "unavailable" in stderr:
                pytest.skip(stderr.strip()[-500:])
            raise RuntimeError(f"the Triton interpreter driver failed to start ({how}):\n"
                               f"{stderr[-3000:]}")
        results[left[0]["id"]] = {"id": left[0]["id"], "problems": [], "strategies": [],
                                  "exception": f"driver process died ({how}, or killed after "
                                               f"{STALL_S} s without progress) on this case",
                                  "error": stderr[-2000:]}
        pending = left[1:]
    return results


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    jobs = [{"id": i, "op": n, "shape": s, "moves": None} for i, n, s in DEFAULTS]
    jobs += [{"id": i, "op": n, "shape": s, "moves": m} for i, n, _, m, s in VARIANTS]
    return run_driver(jobs + [GUARD])


def _params(cases):
    return [pytest.param(c, id=c[0], marks=pytest.mark.xfail(strict=True, reason=KNOWN[c[0]]))
            if c[0] in KNOWN else pytest.param(c, id=c[0]) for c in cases]


def _assert_ok(res: dict) -> None:
    assert res is not None, "the driver gave no result"
    assert res["exception"] is None, f"{res['exception']}\n{res['error']}"
    assert not res["problems"], "\n".join(res["problems"])


@pytest.mark.parametrize("case", _params(DEFAULTS))
def test_default_schedule(results, case):
    _assert_ok(results.get(case[0]))


@pytest.mark.parametrize("case", _params(VARIANTS))
def test_variant_schedule(results, case):
    cid, _, expect, _, _ = case
    res = results.get(cid)
    _assert_ok(res)
    assert expect in res["strategies"], f"plan strategies {res['strategies']}"


def test_kernel_refuses_another_shape_class(results):
    """Lowered at N=50 (one tile of 64), called at N=100: the launcher's guard says so."""
    res = results[GUARD["id"]]
    assert res["exception"] is not None and res["exception"].startswith("ValueError"), res
    assert "y.j: extent must fit one tile of 64" in res["exception"]
    assert "another shape class" in res["exception"]
