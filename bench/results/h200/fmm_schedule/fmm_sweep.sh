#!/usr/bin/env bash
# Leaf size and order sweep with the level graph's phase times; stdout carries everything.
set -u
b=${B:-build/fmm-gpu/trees/fmm/canopy_fmm_gpu_bench}
out=${OUT:-/tmp}/sweep; mkdir -p "$out"
t0=$(date +%s)
run() { local left=$(( ${LIMIT:-560} - ($(date +%s) - t0) )); [ $left -lt 25 ] && { echo "skip $*"; return; }
  echo "### $*"; timeout $left "$b" "$@" --reps 5 2>&1 | grep -v "^check" | tee -a "$out/sweep.txt"; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
run --n 65536,1048576 --order 5 --theta 0.5 --max-leaf 32 --m2l-wait-levels 0,1
run --n 65536,1048576 --order 5 --theta 0.5 --max-leaf 64 --m2l-wait-levels 0,1
run --n 65536,1048576 --order 5 --theta 0.5 --max-leaf 128 --m2l-wait-levels 0,1
run --n 1048576 --order 6 --theta 0.6 --max-leaf 64
run --n 1048576 --order 4 --theta 0.4 --max-leaf 64
run --n 1048576 --order 6 --theta 0.6 --max-leaf 128
echo "total $(( $(date +%s) - t0 )) s"
