#!/usr/bin/env bash
# On the H200 (device tool), from the repo root: the end-to-end model benchmark
# (benchmarks/models/run.py): DLRM and the sequence model in eager PyTorch, torch.compile and
# with kevolve's ops swapped in (kevolve.torch.accelerate; kernels per shape bucket from the
# committed H200 archive, default schedules for the backward ops), outputs and gradients
# checked against eager first, then samples/s and a profiler breakdown.
#   usage: bash benchmarks/h200_model.sh [extra run.py flags, e.g. --modes eager,compile]
# Results: $OUT/2026-12-05-h200-model.{json,md}. Modes: $MODES (default: eager, compile,
# kevolve, kevolve-compile, and reduce-overhead - CUDA graphs - with and without kevolve).
# max-autotune is left out by default: its compile time does not fit the device budget.
set -eu
PY=${PY:-python3}
DEST=${OUT:-/tmp}/2026-12-05-h200-model
PYTHONPATH=. timeout "${LIMIT:-520}" "$PY" -m benchmarks.models.run --device cuda \
  --archive benchmarks/results/h200-archive.db --profile --out "$DEST" \
  --modes "${MODES:-eager,compile,kevolve,kevolve-compile,reduce-overhead,kevolve-reduce-overhead}" "$@"
