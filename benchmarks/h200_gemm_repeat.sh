#!/usr/bin/env bash
# Session 12 on the H200 (device tool), from the repo root, right after the committed
# ranking: the bench on gemm_bias_gelu alone, 3 times in a row on the committed archive (how
# far one run's bare/kevolve ratio moves between runs); each run's results under $OUT/g<i>.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
cp benchmarks/results/h200-archive.db "$OUT/archive.db" && chmod u+w "$OUT/archive.db"
for i in 1 2 3; do
  PYTHONPATH=. PYTHONUNBUFFERED=1 timeout 170 python3 -m kevolve.cli bench --suite ranking \
    --backend triton --ops gemm_bias_gelu --from-archive --top 16 --rounds 5 \
    --db "$OUT/archive.db" --out "$OUT/g$i" > "$OUT/g$i.log" 2>&1
  echo "run $i exit $?"
done
