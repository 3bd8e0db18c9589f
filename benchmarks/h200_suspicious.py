"""The too-good-to-be-true check on the GPU (issue: faults). A search on the real Triton
backend holds two candidates whose kernels cheat the device timer, beside honest ones:

- side_stream: launches on a side CUDA stream that the timing events on the current stream
  never wait for. Correct (the evaluator synchronizes the whole device before checking),
  and timed at roughly the cost of a launch.
- skip_repeat: does nothing when called again on the same buffers, as a timing loop does.

Expected: both are flagged (time below 0.9 x the roofline floor from the ceilings measured
in the same search), timed again, still too fast, and recorded as `suspicious`; the best is
an honest candidate. The candidates are picked by `num_warps` (the cheats use 1 and 2).

    PYTHONPATH=. python3 benchmarks/h200_suspicious.py [--out DIR]

The backend is registered through the `kevolve.backends` entry-point group (a dist-info
folder on sys.path and PYTHONPATH, which spawned workers inherit), as a plug-in would be.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from kevolve.backends.base import Kernel, KernelSource
from kevolve.backends.triton import TritonBackend

HERE = Path(__file__).resolve().parent
CHEATS = {"1": "side_stream", "2": "skip_repeat"}


class GpuFaultyBackend(TritonBackend):
    """Triton kernels, some of which cheat the timer (picked by the plan's num_warps)."""
    name = "gpufaulty"

    def render(self, plan) -> KernelSource:
        src = super().render(plan)
        warps = plan.kernels[0].num_warps if plan.kernels else None
        mode = CHEATS.get(str(warps), "none")
        return replace(src, text=src.text + f"# kevolve timing cheat: {mode}\n",
                       meta={**src.meta, "cheat": mode})

    def build(self, source: KernelSource) -> Kernel:
        import torch

        real = super().build(source)
        mode = source.meta["cheat"]
        state: dict = {"last": None}
        side = torch.cuda.Stream() if mode == "side_stream" else None

        def run(inputs, outputs, params):
            if mode == "side_stream":
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    real(inputs, outputs, params)
            elif mode == "skip_repeat":
                key = tuple(t.data_ptr() for t in (*inputs.values(), *outputs.values()))
                if key != state["last"]:
                    real(inputs, outputs, params)
                    state["last"], state["held"] = key, (inputs, outputs)
            else:
                real(inputs, outputs, params)
        return Kernel(source, run, dict(real.diagnostics, cheat=mode))


def register() -> None:
    site = Path(tempfile.mkdtemp(prefix="kevolve_site_"))
    dist = site / "kevolve_gpufaulty-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kevolve-gpufaulty\n"
                                   "Version: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[kevolve.backends]\ngpufaulty = h200_suspicious:GpuFaultyBackend\n")
    for p in (str(HERE), str(site)):
        sys.path.insert(0, p)
        os.environ["PYTHONPATH"] = p + os.pathsep + os.environ.get("PYTHONPATH", "")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--op", default="softmax")
    args = ap.parse_args()
    register()
    from kevolve.ops import LIBRARY
    from kevolve.schedule import default_trace
    from kevolve.search import SearchConfig, evolve

    d = LIBRARY[args.op]
    sd = d.shape("gpu")
    default = json.loads(default_trace(d.op_for(sd), d.dims(sd)).to_json())
    traces = [default]
    for warps in (1, 2, 16):  # two cheats, one more honest candidate
        t = json.loads(json.dumps(default))
        launch = next((m for m in t["moves"] if m["m"] == "launch"), None)
        if launch is None:
            t["moves"].append(launch := {"m": "launch"})
        launch["num_warps"] = warps
        traces.append(t)
    os.makedirs(args.out, exist_ok=True)
    tpath = Path(args.out) / "suspicious-traces.json"
    tpath.write_text(json.dumps(traces))
    db = str(Path(args.out) / "suspicious.db")
    events = []
    summ = evolve(SearchConfig(args.op, "gpufaulty", budget=len(traces), db=db,
                               proposer="replay", proposer_options={"path": str(tpath)},
                               timeout_s=300, top_k=8),
                  lambda kind, data: events.append([kind, data]))
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT c.trace_json, r.verdict, r.time_ms, r.message, r.diagnostics "
                         "FROM results r JOIN candidates c ON c.id = r.candidate_id "
                         "ORDER BY r.id").fetchall()
    out = []
    for tj, verdict, ms, msg, diag in rows:
        t = json.loads(tj)
        warps = next((m.get("num_warps") for m in t["moves"] if m["m"] == "launch"), None)
        dg = json.loads(diag or "{}")
        out.append({"num_warps": warps, "cheat": CHEATS.get(str(warps), "none"),
                    "verdict": verdict, "time_ms": ms, "message": msg,
                    "first_time_ms": (dg.get("suspicious") or {}).get("time_ms"),
                    "floor_bytes": dg.get("floor_bytes"), "retimed": dg.get("retimed")})
    best_warps = next((m.get("num_warps") for m in json.loads(summ.best.trace_json)["moves"]
                       if m["m"] == "launch"), None) if summ.best else None
    passed = (all(r["verdict"] == "suspicious" for r in out if r["cheat"] != "none")
              and all(r["verdict"] == "ok" for r in out if r["cheat"] == "none")
              and str(best_warps) not in CHEATS and summ.best is not None)
    res = {"op": args.op, "shape": sd, "rows": out, "best_num_warps": best_warps,
           "best_ms": summ.best.result.time_ms if summ.best else None,
           "failures": dict(summ.failures),
           "events": [e for e in events if e[0] == "suspicious"], "passed": passed}
    (Path(args.out) / "h200-suspicious.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
