#!/usr/bin/env bash
# Session 15 on the H200 (device tool), from the repo root: the gemm_bias_gelu search from
# scratch as it stood at 162 candidates (commit e921d65's h200-gemm-fresh-archive.db, where
# the committed ranking took its schedule from), resumed up to 300 in total with this
# session's proposer: its persistent and pipeline mutations start no more persistent
# programs per multiprocessor than one holds (kevolve.backends.resources.resident_programs).
# Seed 2 and the minutes of session 13's own resumption (h200_gemm_fresh_more.sh, run 2).
#   git show e921d65:benchmarks/results/h200-gemm-fresh-archive.db > out/fresh162.db
# then this script with out/fresh162.db carried; the archive comes back as $OUT/resident.db.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
cp "${FROM:-out/fresh162.db}" "$OUT/resident.db" && chmod u+w "$OUT/resident.db"
PYTHONPATH=. PYTHONUNBUFFERED=1 timeout 480 python3 -m kevolve.cli evolve gemm_bias_gelu \
  --backend triton --budget 300 --resume --seed ${SEED:-2} --minutes ${MINUTES:-7.3} --workers 8 \
  --timeout 120 --db "$OUT/resident.db" --json > "$OUT/resident.jsonl" 2> "$OUT/resident.log"
echo "exit $?"
