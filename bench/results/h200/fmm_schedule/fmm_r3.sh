#!/usr/bin/env bash
set -u
B=build/fmm-gpu
out=${OUT:-/tmp}/r3; mkdir -p "$out"
t0=$(date +%s)
which ncu nsys 2>&1 | head -3; ls /usr/local/cuda*/bin 2>/dev/null | grep -iE "ncu|nsys" | head
run() { local left=$(( ${LIMIT:-400} - ($(date +%s) - t0) )); [ $left -lt 25 ] && { echo "skip $*"; return; }
  echo "### $*"; timeout $left $B/trees/fmm/canopy_fmm_gpu_bench "$@" --reps 3 > "$out/b.txt" 2>&1; echo "rc=$?"; cat "$out/b.txt" >> "$out/bench.txt"
  grep -E "^## |^tree|level phases|^\| (task|level)|clocks|disagree|canopy_fmm" "$out/b.txt"; }
run --n 65536,1048576 --order 5 --theta 0.5 --max-leaf 32 --m2l-wait-levels 0 --sample 200
echo "total $(( $(date +%s) - t0 )) s"
