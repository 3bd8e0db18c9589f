#!/usr/bin/env bash
# Session 11 on the H200 (device tool), from the repo root: the counters study on the
# backend's own renderings (SHIPPED=1 benchmarks/h200_gemm_counters.sh), then, on the
# committed archive, gemm_bias_gelu's 40 fastest results measured again where their code
# changed (the Gaussian gate changed every gemm kernel's epilogue) and the 5 bulk-copy seeds
# of benchmarks/seeds/bulk/ (the op's search goes from 295 to 300 candidates). The archive
# comes back under $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
cp benchmarks/results/h200-archive.db "$OUT/archive.db" && chmod u+w "$OUT/archive.db"
SHIPPED=1 bash benchmarks/h200_gemm_counters.sh
PYTHONPATH=. PYTHONUNBUFFERED=1 timeout 330 python3 -m kevolve.cli evolve gemm_bias_gelu \
  --backend triton --proposer replay --traces benchmarks/seeds/bulk/h200-gemm_bias_gelu.json \
  --budget 5 --refresh 40 --minutes 5 --workers 8 --timeout 120 --db "$OUT/archive.db" \
  --json >>"$OUT/evolve.jsonl" 2>>"$OUT/evolve.log"
echo "evolve exit $?"
tail -c 2500 "$OUT/evolve.jsonl"
