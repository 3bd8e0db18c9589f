#!/usr/bin/env bash
# The K-depth study on the H200 (benchmarks/h200_gemm_kdepth.py): checks, do_bench rounds
# and energy per call first (gemm-kdepth.json), then Nsight Compute's counters for one call
# of each contender (kdepth-ncu.csv).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=.:benchmarks PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
python3 benchmarks/h200_gemm_kdepth.py --out "$OUT" 2>&1 | tail -n 40
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
METRICS=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,\
smsp__inst_executed_op_tma_ld.sum,smsp__sass_inst_executed_op_shared_gmma.sum,\
l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,dram__bytes_read.sum,dram__bytes_write.sum,\
lts__t_sector_hit_rate.pct,launch__registers_per_thread,launch__cluster_dim_x,\
smsp__inst_executed_op_ldgsts.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed
"$NCU" --profile-from-start off --clock-control none --metrics "$METRICS" --csv --page raw \
  --log-file "$OUT/ncu.log" python3 benchmarks/h200_gemm_kdepth.py --profile > "$OUT/order.txt"
echo "ncu exit $?"
sed -n '/^"ID"/,$p' "$OUT/ncu.log" > "$OUT/kdepth-ncu.csv"
grep -c . "$OUT/kdepth-ncu.csv"
