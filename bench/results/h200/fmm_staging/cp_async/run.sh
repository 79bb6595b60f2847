#!/bin/bash
# Expansions staged in shared memory by the FMM's bodies, copied with cp.async (gpu_tasks.cuh,
# stage_rows: M2L batches, M2M children, L2L parents) against the binaries before it, on one GPU. Run from the repository
# root on the device machine with stripped binaries in build/ab (carried): fmm_bench_old (HEAD
# before the change), fmm_bench_new, the FMM's GPU tests, nbody_old and nbody_new. The bench
# rounds alternate, one process a round, every result checked against the CPU before it is timed.
set -u
B=build/ab
[ -d $B ] || tar xJf build/ab.tar.xz -C build
nvidia-smi -L
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH=${nccl_lib:+$nccl_lib:}${LD_LIBRARY_PATH:-}
timeout 150 $B/fmm_gpu_evaluate_gpu_test > $OUT/tests.txt 2>&1; echo "fmm evaluate tests rc=$? at ${SECONDS}s"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" $OUT/tests.txt | head -20
args="--n 65536,1048576 --order 5 --theta 0.5 --reps 10 --setup-reps 0"
for round in 1 2; do
  [ $SECONDS -lt 300 ] || break
  echo "== round $round: old" >>"$OUT/old.txt"
  timeout 100 $B/fmm_bench_old $args >>"$OUT/old.txt" 2>&1; echo "old rc=$? at ${SECONDS}s"
  echo "== round $round: new" >>"$OUT/new.txt"
  timeout 100 $B/fmm_bench_new $args >>"$OUT/new.txt" 2>&1; echo "new rc=$? at ${SECONDS}s"
done
grep -hE "^== |^## |^\| task DAG|^\| level graph|^level phases" $OUT/old.txt $OUT/new.txt | cut -c1-220
for v in old new; do
  [ $SECONDS -lt 470 ] || break
  timeout 100 $B/nbody_$v --backend gpu --n 16M --steps 3 --check --check-sample 300 --solver fmm > $OUT/nbody_16M_$v.txt 2>&1
  echo "nbody 16M $v rc=$? at ${SECONDS}s"; grep -E "^(setup|fmm|step|check|result) " $OUT/nbody_16M_$v.txt | cut -c1-160
done
[ $SECONDS -lt 500 ] && { timeout 60 $B/nbody_new --backend gpu --n 1M --steps 10 --check --check-sample 1000 --solver fmm > $OUT/nbody_1M_new.txt 2>&1
  echo "nbody 1M new rc=$? at ${SECONDS}s"; grep -E "^(setup|fmm|step|check|result) " $OUT/nbody_1M_new.txt | cut -c1-160; }
