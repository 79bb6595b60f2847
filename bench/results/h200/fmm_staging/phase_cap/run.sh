#!/bin/bash
# The level graph's M2L phase kernel capped at 128 registers (__launch_bounds__(128, 4): four blocks
# an SM; uncapped, ptxas gives the staged order-5 M2L 152 registers, three blocks) against the final
# staging binary, on one GPU: the FMM bench alternating, two rounds at order 5, then one at order 4.
# Run from the repository root on the device machine with stripped binaries in build/ab (carried):
# fmm_bench_final (8b9b8a8) and fmm_bench_cap.
set -u
B=build/ab
[ -d $B ] || tar xJf build/ab.tar.xz -C build
nvidia-smi -L
args="--n 65536,1048576 --theta 0.5 --reps 10 --setup-reps 0"
for round in 1 2; do
  for v in final cap; do
    echo "== round $round: $v, order 5" >> $OUT/$v.txt
    timeout 100 $B/fmm_bench_$v $args --order 5 >> $OUT/$v.txt 2>&1; echo "$v round $round rc=$? at ${SECONDS}s"
  done
done
for v in final cap; do
  echo "== $v, order 4" >> $OUT/$v.txt
  timeout 100 $B/fmm_bench_$v $args --order 4 >> $OUT/$v.txt 2>&1; echo "$v order 4 rc=$? at ${SECONDS}s"
done
grep -hE "^== |^## |^\| task DAG|^\| level graph|^level phases" $OUT/final.txt $OUT/cap.txt | cut -c1-200
