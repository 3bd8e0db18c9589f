#!/usr/bin/env bash
# On the H200 (device tool), from the repo root: evolve ranking ops with the Triton backend
# into an archive that comes back under $OUT. A previous archive carried in .kevolve/h200.db
# is continued (the GPU machine keeps nothing between calls).
#   usage: WORKERS=8 bash benchmarks/h200_evolve.sh [op[:budget[:minutes]] ...]
# Each op gets `budget` more candidates (default $BUDGET or 24) within `minutes` (default
# $MINUTES or 0.9). When benchmarks/seeds/h200-OP.json exists, its traces are evaluated
# first (replay proposer, counted in the budget); the heuristic search then continues from
# the whole population in the archive. SEEDS=DIR takes the seed files from DIR instead.
set -u
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
DB="$OUT/archive.db"
[ -f .kevolve/h200.db ] && cp .kevolve/h200.db "$DB" && chmod u+w "$DB"
ITEMS=${*:-gemm_bias_gelu dot_interaction jagged_softmax softmax layernorm embedding_bag jagged_sum swish_add}
evolve() {  # op budget minutes extra-args...
  local op=$1 budget=$2 minutes=$3; shift 3
  PYTHONPATH=. PYTHONUNBUFFERED=1 python3 -m kevolve.cli evolve "$op" --backend triton \
    --budget "$budget" --minutes "$minutes" --workers "${WORKERS:-8}" \
    --timeout 120 --db "$DB" --json "$@" >>"$OUT/evolve.jsonl" 2>>"$OUT/evolve.log" \
    || echo "evolve $op failed" >&2
  tail -n 1 "$OUT/evolve.jsonl" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(d['op'], d['evaluated'], d['failed'], d['failures'], d['best_time_ms'], d['baseline_ms'], d['speedup'])" || true
}
for item in $ITEMS; do
  IFS=: read -r op budget minutes <<<"$item"
  budget=${budget:-${BUDGET:-24}}
  minutes=${minutes:-${MINUTES:-0.9}}
  echo "== $op (+$budget candidates, $minutes min)" >&2
  seeds="${SEEDS:-benchmarks/seeds}/h200-$op.json"
  if [ -f "$seeds" ]; then
    n=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$seeds")
    rm_min=$(python3 -c "print(min(0.8, $minutes / 2))")
    evolve "$op" "$n" "$rm_min" --proposer replay --traces "$seeds"
    budget=$((budget > n ? budget - n : 0))
    minutes=$(python3 -c "print(max(0.1, $minutes - $rm_min))")
  fi
  [ "$budget" -gt 0 ] && evolve "$op" "$budget" "$minutes"
done
