#!/bin/bash
# Urgent tasks (Ops::urgent; the FMM's gpu_evaluator::set_urgent_height) against the binary before
# them, on one GPU. Run from the repository root on the device machine with stripped binaries in
# build/ab (carried): bench_base (the FMM bench of 2fe519b), bench_new (with the hook; its DAG
# variants: urgent heights 2, -1 = none, 1, 3), and the GPU tests of the runtime and the FMM.
# Each bench is one process a round, the rounds alternate (a second round while time is left),
# every result checked against the CPU before it is timed.
set -u
B=build/ab
nvidia-smi -L
timeout 120 $B/runtime_gpu_scheduler_test --gtest_filter='*Urgent*' > $OUT/tests.txt 2>&1; echo "runtime urgent tests rc=$?"
timeout 120 $B/fmm_gpu_evaluate_gpu_test >> $OUT/tests.txt 2>&1; echo "fmm evaluate tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" $OUT/tests.txt | head -20
args="--n 16384,65536,1048576 --order 5 --theta 0.5 --reps 10 --setup-reps 0"
for round in 1 2; do
  [ $SECONDS -lt 330 ] || break
  echo "== round $round: base" >>"$OUT/base.txt"
  timeout 120 $B/bench_base $args >>"$OUT/base.txt" 2>&1; echo "base rc=$? at ${SECONDS}s"
  echo "== round $round: new, urgent heights 2,-1,1,3" >>"$OUT/new.txt"
  timeout 150 $B/bench_new $args --urgent-heights 2,-1,1,3 >>"$OUT/new.txt" 2>&1; echo "new rc=$? at ${SECONDS}s"
done
grep -hE "^== |^## |^\| task DAG|^\| level graph" $OUT/base.txt $OUT/new.txt | cut -c1-150
