#!/usr/bin/env bash
# Session 13 on the H200 (device tool), from the repo root: session 12's gemm_bias_gelu
# search from scratch (h200-gemm-fresh-archive.db, 122 evaluated) resumed up to 300 in
# total, with this session's proposer (each kind of mutation once on the leader before any
# twice; group_m halved or doubled) and another seed. The archive comes back under $OUT.
# Run 1: seed 1, 8.3 minutes (stalled at 162). Run 2, on run 1's archive, after the proposer
# learnt to go a step further: SEED=2 MINUTES=7.3.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
cp benchmarks/results/h200-gemm-fresh-archive.db "$OUT/fresh.db" && chmod u+w "$OUT/fresh.db"
PYTHONPATH=. PYTHONUNBUFFERED=1 timeout 540 python3 -m kevolve.cli evolve gemm_bias_gelu \
  --backend triton --budget 300 --resume --seed ${SEED:-1} --minutes ${MINUTES:-8.3} --workers 8 \
  --timeout 120 --db "$OUT/fresh.db" --json > "$OUT/fresh-more-s${SEED:-1}.jsonl" 2> "$OUT/fresh-more-s${SEED:-1}.log"
echo "exit $?"
