#!/usr/bin/env bash
# Sessions 16 to 18 on the H200 (device tool), from the repo root: the Gaussian gate's fit
# study (benchmarks/h200_gate_fit.py) on the ranking's gemm kernel, timings and energy per
# call, then Nsight Compute's counters (h200_gemm_counters.COUNTERS) for one call of each
# run. VARIANTS=own,fit3,bias_only gives session 16's run; unset, session 17's.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=.:benchmarks PYTHONUNBUFFERED=1
DB=${DB:-benchmarks/results/h200-gemm-resident-archive.db}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
python3 benchmarks/h200_gate_fit.py --db "$DB" --out "$OUT" --rounds 9 --seconds 2 ${VARIANTS:+--variants "$VARIANTS"} 2>&1 | tail -n 40
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
METRICS=$(python3 -c "from h200_gemm_counters import COUNTERS; print(','.join(c[0] for c in COUNTERS))")
"$NCU" --profile-from-start off --clock-control none --metrics "$METRICS" \
  --csv --page raw --log-file "$OUT/ncu.log" \
  python3 benchmarks/h200_gate_fit.py --db "$DB" --profile ${VARIANTS:+--variants "$VARIANTS"} > "$OUT/order.txt"
echo "ncu exit $?"
sed -n '/^"ID"/,$p' "$OUT/ncu.log" > "$OUT/gate-fit-ncu.csv"
python3 benchmarks/h200_gemm_counters.py --summarize "$OUT/gate-fit-ncu.csv"
