#!/usr/bin/env bash
# Session 13 on the H200 (device tool), from the repo root, right after the search from
# scratch reached 300 candidates (h200_gemm_fresh_more.sh, SEED=2): the bench on
# gemm_bias_gelu alone, twice from that archive (g1, g2), then once from the committed
# archive (c1), as in h200_gemm_repeat.sh; each run's results under $OUT/<run>. Session 13
# ran these commands inline in two calls (g1 and g2, then c1); h200-gemm-capped.json
# holds the three rows.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
cp benchmarks/results/h200-gemm-fresh-archive.db "$OUT/f.db" && chmod u+w "$OUT/f.db"
cp benchmarks/results/h200-archive.db "$OUT/a.db" && chmod u+w "$OUT/a.db"
for run in g1:f.db g2:f.db c1:a.db; do
  name=${run%%:*} db=${run#*:}
  PYTHONPATH=. PYTHONUNBUFFERED=1 timeout 200 python3 -m kevolve.cli bench --suite ranking \
    --backend triton --ops gemm_bias_gelu --from-archive --top 16 --rounds 5 \
    --db "$OUT/$db" --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  echo "run $name exit $?"
done
