# Why jagged_softmax's candidates 50 and 276 ran at 0.099 ms only in benches that also timed
# torch.compile (session 8, code at 69d1c05, before the Triton backend chose its ptxas):
# bench jagged_softmax with and without torch.compile, each with its own Triton cache, then
# put the kevolve kernels' binaries side by side (cache key, cubin hash, registers, LDG
# count, warps, stages, shared bytes), plus a short softmax search as a GPU smoke test.
#   bash benchmarks/h200_ptxas_compare.sh        # on the GPU machine; $OUT/cubins.txt
# Result: benchmarks/results/h200-ptxas.txt. Same cache keys, same TTGIR and LLVM IR, other
# PTX versions (9.0 with torch.compile, 8.7 without) and cubins: torch.compile had pointed
# TRITON_PTXAS_PATH at torch's ptxas 13.0. From the next commit on the backend picks the
# ptxas itself, so both runs below use the same one and agree.
cp benchmarks/results/h200-archive.db $OUT/archive.db
BIN=$(python3 -c "import triton,os;print(os.path.join(os.path.dirname(triton.__file__),'backends/nvidia/bin'))")
for mode in w n; do
  flag=""; [ $mode = n ] && flag="--no-compile"
  TRITON_CACHE_DIR=$OUT/tc$mode PYTHONPATH=. timeout 220 python3 -m kevolve.cli bench --suite ranking --ops jagged_softmax --backend triton --from-archive --top 16 --rounds 2 $flag --db $OUT/archive.db --out $OUT/js$mode > $OUT/js$mode.log 2>&1
  echo "bench $mode rc $?"
  for f in $OUT/tc$mode/*/k_*.cubin; do
    echo "$mode $(basename $(dirname $f)) $(sha256sum < $f | cut -c1-16) $($BIN/cuobjdump -res-usage $f 2>/dev/null | grep -o 'REG:[0-9]*' | head -1) LDG $($BIN/cuobjdump -sass $f | grep -c LDG) $(python3 -c "import json,sys;m=json.load(open(sys.argv[1]));print(m.get('num_warps'),m.get('num_stages'),m.get('shared'))" ${f%.cubin}.json)"
  done >> $OUT/cubins.txt
done
python3 - <<'P' >> $OUT/cubins.txt
import json, os
for m in "wn":
    r = json.load(open(os.path.join(os.environ["OUT"], f"js{m}", "results.json")))["rows"][0]
    print(m, "compile", r.get("compile_ms"), "kevolve", r.get("candidate"), r.get("kevolve_ms"), r.get("kevolve_verdict"))
    print(m, [(c["candidate"], c["ms"] and round(c["ms"], 4), c["verdict"]) for c in r["contenders"]])
P
tar czf $OUT/cubins.tgz -C $OUT tcw tcn 2>/dev/null; rm -rf $OUT/tcw $OUT/tcn
PYTHONPATH=. timeout 150 python3 -m kevolve.cli evolve softmax --backend triton --budget 10 --workers 4 --minutes 1.5 --db $OUT/smoke.db --json > $OUT/smoke.log 2>&1; echo "smoke rc $?"
tail -c 1500 $OUT/smoke.log
cat $OUT/cubins.txt
rm -f $OUT/archive.db* $OUT/smoke.db* $OUT/jsw/report.html $OUT/jsn/report.html
find $OUT -type f | sort
