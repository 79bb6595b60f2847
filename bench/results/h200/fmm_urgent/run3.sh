#!/bin/bash
# As run2.sh, after a group pushes its urgent tasks with one reservation (push_urgent_bits): the
# urgent-task and FMM tests, then the FMM bench before (bench_base, 2fe519b) and after, one round
# each (urgent heights 2, -1 = none, 1, 3).
set -u
B=build/ab
nvidia-smi -L
timeout 100 $B/runtime_gpu_scheduler_test --gtest_filter='*Urgent*' > $OUT/tests3.txt 2>&1; echo "runtime urgent tests rc=$?"
timeout 100 $B/fmm_gpu_evaluate_gpu_test >> $OUT/tests3.txt 2>&1; echo "fmm evaluate tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |tests ran" $OUT/tests3.txt | head -20
args="--n 65536,1048576 --order 5 --theta 0.5 --reps 10 --setup-reps 0"
echo "== base" >>"$OUT/base3.txt"
timeout 100 $B/bench_base $args >>"$OUT/base3.txt" 2>&1; echo "base rc=$? at ${SECONDS}s"
echo "== new, urgent heights 2,-1,1,3" >>"$OUT/new3.txt"
timeout 120 $B/bench_new $args --urgent-heights 2,-1,1,3 >>"$OUT/new3.txt" 2>&1; echo "new rc=$? at ${SECONDS}s"
grep -hE "^== |^## |^\| task DAG|^\| level graph|critical chain, first|DAG timeline" $OUT/base3.txt $OUT/new3.txt | cut -c1-250
