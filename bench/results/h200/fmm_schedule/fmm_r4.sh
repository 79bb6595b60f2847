#!/usr/bin/env bash
set -u
B=build/fmm-gpu
out=${OUT:-/tmp}/r4; mkdir -p "$out"
t0=$(date +%s)
for t in fmm_gpu_evaluate_gpu_test fmm_device_lists_gpu_test; do
  timeout 200 $B/tests/gpu/fmm/$t > "$out/$t.txt" 2>&1; echo "$t rc=$? $(grep -E 'PASSED|FAILED' "$out/$t.txt" | tr '\n' ' ')"
  grep -E "FAILED|Failure|Expected|Which is|actual" "$out/$t.txt" | head -20
done
echo "tests $(( $(date +%s) - t0 )) s"
run() { local left=$(( ${LIMIT:-500} - ($(date +%s) - t0) )); [ $left -lt 25 ] && { echo "skip $*"; return; }
  echo "### $*"; timeout $left $B/trees/fmm/canopy_fmm_gpu_bench "$@" --reps 5 > "$out/b.txt" 2>&1; echo "rc=$?"; cat "$out/b.txt" >> "$out/bench.txt"
  grep -E "^## |^tree|level phases|^\| (task|level)|clocks|DAG run|accuracy|disagree|canopy_fmm" "$out/b.txt"; }
run --n 65536,1048576 --order 5 --theta 0.5 --max-leaf 32 --m2l-wait-levels 0 --sample 300 --mode warp-rounds
run --n 65536,1048576 --order 5 --theta 0.5 --max-leaf 32 --m2l-wait-levels 0 --sample 300 --mode continuation
run --n 65536,1048576 --order 5 --theta 0.5 --max-leaf 64 --m2l-wait-levels 0,1 --sample 300 --mode warp-rounds
run --n 1048576 --order 6 --theta 0.6 --max-leaf 32 --m2l-wait-levels 0 --sample 300 --mode warp-rounds
echo "total $(( $(date +%s) - t0 )) s"
