"""Why jagged_softmax's candidate 50 (one program of 8 warps per segment) times at 0.099 ms
inside `kevolve bench` runs that also time torch.compile, but at 0.155 ms elsewhere: time it
and the persistent candidate 406 in one process through the steps such a bench takes before
its contenders (idle time, measuring the ceilings, fresh inputs, the float64 reference,
torch.compile of the op), with the GPU's SM clock, memory clock, power, temperature and
clock-event reasons from nvidia-smi beside each.

    PYTHONPATH=. python3 benchmarks/h200_jagged_softmax_state.py --out $OUT   # state.txt

Each line: the step, do_bench medians {candidate: ms}, candidate 50 again with 500 ms of
warm-up and of repetitions, nvidia-smi before and after, the values tensor's address.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import time

import numpy as np
import torch

import kevolve
from kevolve.agent import evaluate as ev
from kevolve.agent.hardware import measure_ceilings
from kevolve.ir.interp import bind_dims
from kevolve.ops import LIBRARY

ARCHIVE = "benchmarks/results/h200-archive.db"
CANDIDATES = (50, 406)


def smi() -> str:
    q = "clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
    return subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    db = sqlite3.connect(ARCHIVE)
    d = LIBRARY["jagged_softmax"]
    sd = d.shape("gpu")
    op = d.op_for(sd)
    case = d.make(sd, np.random.default_rng(0))
    dims = bind_dims(op, case.inputs, case.params)
    be = kevolve.backend("triton")
    ks = {}
    for c in CANDIDATES:
        (tj,) = db.execute("SELECT trace_json FROM candidates WHERE id = ?", (c,)).fetchone()
        ks[c] = kevolve.build(kevolve.lower(op, tj, be, dims), be)
    state, lines = {}, []

    def step(tag: str, fresh: bool = False) -> None:
        if fresh or "ins" not in state:
            state["ins"] = ev.inputs_for(op, case.inputs, "torch", "cuda")
            state["outs"] = ev.alloc_outputs(op, dims, "torch", "cuda")
        ins, outs = state["ins"], state["outs"]
        before = smi()
        ms = {}
        for c, k in ks.items():
            k(ins, outs, case.params)
            torch.cuda.synchronize()
            ms[c] = round(ev.time_gpu(lambda k=k: k(ins, outs, case.params)), 4)
        long = round(ev.time_gpu(lambda: ks[50](ins, outs, case.params), warmup_ms=500,
                                 rep_ms=500), 4)
        line = (f"{tag:22s} {ms} 50/long {long} | {before} | after {smi()} | "
                f"{hex(ins['values'].data_ptr())}")
        print(line, flush=True)
        lines.append(line)

    step("fresh")
    time.sleep(8)
    step("after 8 s idle")
    measure_ceilings(True)
    step("right after ceilings")
    step("ceilings, new inputs", fresh=True)
    time.sleep(8)
    step("8 s idle, same")
    tins = ev.inputs_for(op, case.inputs, "torch", "cuda")
    t64 = {k: (v.double() if v.is_floating_point() else v) for k, v in tins.items()}
    {k: v.double().cpu().numpy() for k, v in d.torch_eager(t64, case.params).items()}
    del t64
    step("after t64 ref")
    fn = torch.compile(lambda x: d.torch_eager(x, case.params))
    with torch.no_grad():
        fn(tins)
    torch.cuda.synchronize()
    step("after compile, same")
    step("after compile, new", fresh=True)
    with open(os.path.join(args.out, "state.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
