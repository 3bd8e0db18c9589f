#!/usr/bin/env bash
# On the H200 (device tool), from the repo root: evolve each ranking op with the Triton
# backend into an archive that comes back under $OUT. A previous archive carried in
# .kevolve/h200.db is continued (the GPU machine keeps nothing between calls).
#   usage: BUDGET=24 MINUTES=0.9 WORKERS=8 bash benchmarks/h200_evolve.sh [ops...]
set -u
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
DB="$OUT/archive.db"
[ -f .kevolve/h200.db ] && cp .kevolve/h200.db "$DB"
OPS=${*:-gemm_bias_gelu dot_interaction jagged_softmax softmax layernorm embedding_bag jagged_sum swish_add}
for op in $OPS; do
  echo "== $op" >&2
  PYTHONPATH=. PYTHONUNBUFFERED=1 python3 -m kevolve.cli evolve "$op" --backend triton \
    --budget "${BUDGET:-24}" --minutes "${MINUTES:-0.9}" --workers "${WORKERS:-8}" \
    --timeout 120 --db "$DB" --json >>"$OUT/evolve.jsonl" 2>>"$OUT/evolve.log" \
    || echo "evolve $op failed" >&2
  tail -n 1 "$OUT/evolve.jsonl" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(d['op'], d['evaluated'], d['failed'], d['failures'], d['best_time_ms'], d['baseline_ms'], d['speedup'])" || true
done
