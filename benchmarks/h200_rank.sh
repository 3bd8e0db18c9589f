#!/usr/bin/env bash
# The committed H200 ranking (device tool), from the repo root: the bench on the committed
# archive, from archive, beside torch eager and torch.compile, CUDA too; files under $OUT/rank.
# Arguments go to the bench, e.g. --op-db gemm_bias_gelu=PATH for one op's own archive (docs/results.md).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
cp benchmarks/results/h200-archive.db "$OUT/archive.db" && chmod u+w "$OUT/archive.db"
PYTHONPATH=. PYTHONUNBUFFERED=1 python3 -m kevolve.cli bench --suite ranking --backend triton \
  --from-archive --top 16 --rounds 5 --db "$OUT/archive.db" --also cuda --out "$OUT/rank" "$@"
