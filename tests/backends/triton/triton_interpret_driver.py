"""Run backend_checks on the Triton backend in interpreter mode, in its own process.

Triton's interpreter is a process-wide mode fixed when triton is first imported, so the
tests start this script with TRITON_INTERPRET=1 and read its JSON answer:

    python triton_interpret_driver.py < jobs.json > results.jsonl

jobs.json: [{"id": str, "op": str, "shape": {...}, "moves": [...] | null,
             "call_shape": {...} | absent}, ...]   (call_shape: run there, lowered at shape)
results.jsonl: {"ready": true} once set up, then one line per finished job, flushed as it
finishes (so a job that kills the process is the first one without a line):
{"id", "problems": [str], "seconds": float, "strategies": [str],
 "exception": "Type: message" | null, "error": the last lines of its traceback | null}."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

import backend_checks as bc


def main() -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("run with TRITON_INTERPRET=1 (Triton's interpreter is fixed at import)")
    from kevolve import ops
    from kevolve.backends.triton import TritonBackend

    be = TritonBackend(interpret=True)
    ok, why = be.available()
    if not ok:
        sys.exit(f"triton interpreter unavailable: {why}")
    print(json.dumps({"ready": True}), flush=True)
    for job in json.load(sys.stdin):
        t = time.perf_counter()
        res = {"id": job["id"], "problems": [], "error": None, "exception": None,
               "strategies": []}
        try:
            d = ops.resolve(job["op"])
            op = d.op_for(job["shape"])
            plan = bc.plan_for(op, d.dims(job["shape"]), job.get("moves"))
            res["strategies"] = sorted({st.strategy for k in plan.kernels for st in k.steps})
            res["problems"] = bc.check(be, job["op"], job["shape"], job.get("moves"),
                                       call_shape=job.get("call_shape"))
        except Exception as e:
            tb = traceback.format_exception(e)
            res["error"] = "".join(tb[-3:])[-3000:]
            res["exception"] = f"{type(e).__name__}: {e}"
        res["seconds"] = time.perf_counter() - t
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
