#!/usr/bin/env bash
# Session 12 on the H200 (device tool), from the repo root: on the committed archive, the 2
# seeds of benchmarks/seeds/pipeline/ (the 128x256x64 kernel with both operands copied in
# bulk, its tile loop pipelined across tiles and its output written in bulk in 2 pieces,
# at 3 stages / group_m 8 and 4 stages / group_m 4: the two best of h200_gemm_kdepth.py
# --loops). gemm_bias_gelu's archive goes from 300 to 302 candidates. The archive comes
# back under $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
cp benchmarks/results/h200-archive.db "$OUT/archive.db" && chmod u+w "$OUT/archive.db"
PYTHONPATH=. PYTHONUNBUFFERED=1 timeout 300 python3 -m kevolve.cli evolve gemm_bias_gelu \
  --backend triton --proposer replay --traces benchmarks/seeds/pipeline/h200-gemm_bias_gelu.json \
  --budget 2 --minutes 4 --workers 2 --timeout 120 --db "$OUT/archive.db" \
  --json >>"$OUT/evolve.jsonl" 2>>"$OUT/evolve.log"
echo "evolve exit $?"
tail -c 2500 "$OUT/evolve.jsonl"
