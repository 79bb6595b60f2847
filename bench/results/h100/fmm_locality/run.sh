#!/usr/bin/env bash
# The p2p order by cost classes (powers of two, Morton order within a class) against the order by
# cost alone (the stage of 5f74034), on one GPU: the FMM bench at 64k and 1M and the N-body step
# with the FMM at 16M bodies, each binary one process, alternating; then the device-list tests of
# the new build (its host and device DAGs equal). Stripped binaries in build/ab (carried, packed):
# bench_cost, nbody_cost (5f74034), bench_class, nbody_class, fmm_device_lists_gpu_test.
set -u
B=build/ab
nvidia-smi -L
args="--n 65536,1048576 --order 5 --theta 0.5 --reps 10 --setup-reps 0"
for round in 1 2; do
  for v in cost class; do
    echo "== round $round: $v" >>"$OUT/bench_$v.txt"
    timeout 90 $B/bench_$v $args >>"$OUT/bench_$v.txt" 2>&1
  done
done
for dist in plummer uniform; do
  for v in cost class; do
    echo "== $dist: $v" >>"$OUT/nbody_$v.txt"
    timeout 90 $B/nbody_$v --backend gpu --solver fmm --n 16M --steps 3 --check --check-sample 300 --dist $dist >>"$OUT/nbody_$v.txt" 2>&1
  done
done
timeout 120 $B/fmm_device_lists_gpu_test > "$OUT/fmm_device_lists_gpu_test.txt" 2>&1
grep -hE "^== |^## |^\| task DAG|^\| level graph|^(setup|fmm|step) |^result" "$OUT"/bench_cost.txt "$OUT"/bench_class.txt "$OUT"/nbody_cost.txt "$OUT"/nbody_class.txt | cut -c1-160
tail -3 "$OUT/fmm_device_lists_gpu_test.txt"
