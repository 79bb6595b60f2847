#!/bin/bash
# The dealt sources (scheduler_options::dealt_sources) and the p2p tasks numbered longest first,
# against the binary before them, on one GPU. Run from the repository root on the device machine
# with stripped binaries in build/ab (carried): bench_base (the FMM bench before the change),
# bench_new (after it), and the GPU tests of the runtime and the FMM after it. Each binary is one
# process a round, the rounds alternate, every result checked against the CPU before it is timed.
set -u
B=build/ab
nvidia-smi -L
args="--n 65536,1048576 --order 5 --theta 0.5 --reps 10 --setup-reps 0"
for round in 1 2; do
  echo "== round $round: base" >>"$OUT/base.txt"
  $B/bench_base $args >>"$OUT/base.txt" 2>&1
  echo "== round $round: new, up tasks dealt (default)" >>"$OUT/new.txt"
  $B/bench_new $args >>"$OUT/new.txt" 2>&1
  echo "== round $round: new, every source dealt" >>"$OUT/new_all_dealt.txt"
  $B/bench_new $args --dealt-sources 2147483647 >>"$OUT/new_all_dealt.txt" 2>&1
done
{
  timeout 300 $B/runtime_gpu_scheduler_test 2>&1 | tail -25
  timeout 200 $B/fmm_device_lists_gpu_test 2>&1 | tail -12
  timeout 200 $B/fmm_gpu_evaluate_gpu_test 2>&1 | tail -12
} >"$OUT/tests.txt"
grep -h "^| task DAG\|^| level graph\|speed-up\|^## \|== round\|critical chain, first" "$OUT"/base.txt "$OUT"/new.txt "$OUT"/new_all_dealt.txt
grep -h "PASSED\|FAILED" "$OUT/tests.txt"
