"""End-to-end benchmark of the reference ranking models: eager PyTorch, torch.compile
(default, and max-autotune when asked) and the same models with kevolve's ops swapped in by
`kevolve.torch.accelerate` (run eagerly, and under torch.compile). The runner is
kevolve.bench.models (also `kevolve bench --suite model`); this script gives it every knob.

    PYTHONPATH=. python -m benchmarks.models.run --device cuda \
        --archive benchmarks/results/h200-archive.db --out /tmp/model

Writes OUT.json and OUT.md. `--scale N` divides the embedding tables' rows (CPU runs).
"""

from __future__ import annotations

import argparse
import json
import sys

from kevolve.bench import models as e2e

from . import zoo

MODULES = zoo.MODULES


def main(argv=None) -> int:
    d = e2e.Settings()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default=None, help="default: cuda where there is one")
    ap.add_argument("--models", default=",".join(d.models))
    ap.add_argument("--modes", default=",".join(d.modes), help=", ".join(e2e.ALL_MODES))
    ap.add_argument("--archive", default=None, help="kevolve archive (default schedules "
                    "without one)")
    ap.add_argument("--backend", default=None, help="the kevolve modes' backend (default: "
                    "triton on a GPU, else cpu)")
    ap.add_argument("--scale", type=int, default=d.scale)
    ap.add_argument("--serve-batch", type=int, default=d.serve_batch)
    ap.add_argument("--large-batch", type=int, default=d.large_batch)
    ap.add_argument("--train-batch", type=int, default=d.train_batch)
    ap.add_argument("--batches", type=int, default=d.batches)
    ap.add_argument("--rounds", type=int, default=d.rounds)
    ap.add_argument("--iters", type=int, default=d.iters)
    ap.add_argument("--tol", type=float, default=d.tol)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--out", required=True, help="output prefix (writes OUT.json, OUT.md)")
    a = ap.parse_args(argv)
    s = e2e.Settings(models=tuple(a.models.split(",")), modes=tuple(a.modes.split(",")),
                     archive=a.archive, backend=a.backend, device=a.device, scale=a.scale,
                     serve_batch=a.serve_batch, large_batch=a.large_batch,
                     train_batch=a.train_batch, batches=a.batches, rounds=a.rounds,
                     iters=a.iters, tol=a.tol, profile=a.profile)

    def save(rep):  # after each model: a timeout keeps some
        with open(a.out + ".json", "w") as f:
            json.dump(rep, f, indent=1)
        with open(a.out + ".md", "w") as f:
            f.write(e2e.markdown(rep))

    from kevolve.torch import accelerate

    command = " ".join(["python -m benchmarks.models.run", *(argv or sys.argv[1:])])
    rep = e2e.run(zoo, s, accelerate, command,
                  lambda m: print(m, file=sys.stderr, flush=True), on_model=save)
    save(rep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
