#!/usr/bin/env bash
# Session 12 on the H200 (device tool), from the repo root: a gemm_bias_gelu search from
# scratch (the default schedule, the heuristic proposer with this session's mutations) in
# an empty archive, at most 300 candidates in 6 minutes: how far a search within the
# issue's limit gets with the moves there are now. The archive comes back under $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
PYTHONPATH=. PYTHONUNBUFFERED=1 timeout 420 python3 -m kevolve.cli evolve gemm_bias_gelu \
  --backend triton --budget 300 --minutes 6 --workers 8 --timeout 120 --db "$OUT/fresh.db" \
  --json > "$OUT/fresh.jsonl" 2> "$OUT/fresh.log"
echo "exit $?"
