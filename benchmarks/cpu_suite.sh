#!/usr/bin/env bash
# The CPU suite on the 2-core development machine (threads fixed to 2 for kevolve and torch).
#   1. default schedules:  bash benchmarks/cpu_suite.sh defaults   (RUNS runs, empty archive)
#   2. evolve each op:     bash benchmarks/cpu_suite.sh evolve     (budget 64, heuristic)
#   3. evolved schedules:  bash benchmarks/cpu_suite.sh evolved    (RUNS runs, from the archive)
# Each bench run times torch eager and kevolve side by side in one process (add torch.compile
# by dropping --no-compile: on 2 cores its compile time dominates the run).
set -eu
KV=${KV:-.venv/bin/kevolve}
OUTDIR=${OUTDIR:-benchmarks/results/cpu}
DB=${DB:-benchmarks/results/cpu/archive.db}
OPS="softmax layernorm rmsnorm embedding_bag jagged_sum dot_interaction"
mkdir -p "$OUTDIR"
case "${1:-}" in
  defaults)
    for run in $(seq "${RUNS:-2}"); do
      rm -f "$OUTDIR/empty.db"*
      "$KV" bench --suite cpu --budget 0 --threads 2 --no-compile --db "$OUTDIR/empty.db" \
        --out "$OUTDIR/defaults-$run"
    done
    rm -f "$OUTDIR/empty.db"* ;;
  evolve)
    for op in $OPS; do
      "$KV" evolve "$op" --backend cpu --budget "${BUDGET:-64}" --threads 2 --db "$DB" \
        --json >>"$OUTDIR/evolve.jsonl"
    done ;;
  evolved)
    for run in $(seq "${RUNS:-2}"); do
      "$KV" bench --suite cpu --from-archive --threads 2 --no-compile --db "$DB" \
        --out "$OUTDIR/evolved-$run"
    done ;;
  *) echo "usage: $0 defaults|evolve|evolved" >&2; exit 2 ;;
esac
