#!/usr/bin/env bash
# The gemm_bias_gelu counters study on the H200 (benchmarks/h200_gemm_counters.py): timings
# and energy per call first, then Nsight Compute's full set of counters for one call of
# each contender, as CSV (h200-gemm-counters.json, h200-gemm-counters-ncu.csv: the log's
# CSV part, which the last step cuts out; the first run cut it out by hand the same way).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=.:benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
# SHIPPED=1: the variants as the backend renders them now (--shipped)
FLAG=${SHIPPED:+--shipped}
python3 benchmarks/h200_gemm_counters.py --out "$OUT" $FLAG 2>&1 | tail -n 60
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
"$NCU" --version | tail -1
"$NCU" --profile-from-start off --clock-control none --set full --import-source no \
  --csv --page raw --log-file "$OUT/ncu.log" \
  python3 benchmarks/h200_gemm_counters.py --profile $FLAG > "$OUT/order.txt"
echo "ncu exit $?"
# ncu writes its report into its log, after its own messages: the CSV is from the header on
sed -n '/^"ID"/,$p' "$OUT/ncu.log" > "$OUT/ncu.csv"
grep -c . "$OUT/ncu.csv"
