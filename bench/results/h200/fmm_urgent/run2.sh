#!/bin/bash
# As run.sh, after the queues' pops took their items with one fetch_sub (take_items) instead of a
# compare-and-swap loop: the tests of the queues, the urgent tasks and the FMM, then the FMM bench
# before (bench_base, 2fe519b) and after, alternating (urgent heights 2, -1 = none, 1, 0).
set -u
B=build/ab
nvidia-smi -L
timeout 120 $B/gpu_queue_stress_test > $OUT/tests2.txt 2>&1; echo "queue stress rc=$?"
timeout 150 $B/runtime_gpu_scheduler_test >> $OUT/tests2.txt 2>&1; echo "runtime scheduler tests rc=$?"
timeout 120 $B/fmm_gpu_evaluate_gpu_test >> $OUT/tests2.txt 2>&1; echo "fmm evaluate tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |tests ran" $OUT/tests2.txt | head -20
args="--n 65536,1048576 --order 5 --theta 0.5 --reps 10 --setup-reps 0"
for round in 1 2; do
  [ $SECONDS -lt 420 ] || break
  echo "== round $round: base" >>"$OUT/base2.txt"
  timeout 100 $B/bench_base $args >>"$OUT/base2.txt" 2>&1; echo "base rc=$? at ${SECONDS}s"
  echo "== round $round: new, urgent heights 2,-1,1,0" >>"$OUT/new2.txt"
  timeout 120 $B/bench_new $args --urgent-heights 2,-1,1,0 >>"$OUT/new2.txt" 2>&1; echo "new rc=$? at ${SECONDS}s"
done
grep -hE "^== |^## |^\| task DAG|^\| level graph|critical chain, first|DAG timeline" $OUT/base2.txt $OUT/new2.txt | cut -c1-250
