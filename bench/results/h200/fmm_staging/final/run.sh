#!/bin/bash
# The final staging code (the DAG stages up and down, the level graphs every kind: the defaults),
# on one GPU: the FMM's GPU tests and gpu-check's FMM steps, the FMM bench at 16k, 64k and 1M
# points (order 5, theta 0.5) beside the binary before staging, order 6 at theta 0.6 at 1M, and the
# N-body step with the FMM at 1M and 16M Plummer bodies. Run from the repository root on the device
# machine with stripped binaries in build/ab (carried).
set -u
B=build/ab
[ -d $B ] || tar xJf build/ab.tar.xz -C build
nvidia-smi -L
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH=${nccl_lib:+$nccl_lib:}${LD_LIBRARY_PATH:-}
for t in fmm_gpu_evaluate_gpu_test fmm_device_lists_gpu_test; do
  timeout 150 $B/$t > $OUT/tests_$t.txt 2>&1; echo "$t rc=$? at ${SECONDS}s"
  grep -E "^\[  (PASSED|FAILED) |FAILED" $OUT/tests_$t.txt | head -8
done
{ timeout 60 $B/nbody_new --n 8000 --steps 5 --dt 0.005 --theta 0.5 --softening 0.01 --check --check-sample 0 --max-drift 1e-5 \
    --backend gpu --solver fmm; echo "nbody-fmm-8k rc=$?"
  timeout 90 $B/fmm_bench_new --n 65536 --order 6 --reps 5; echo "fmm-bench-64k-p6 rc=$?"; } > $OUT/gpu_check_fmm_steps.txt 2>&1
grep -E "rc=|^result" $OUT/gpu_check_fmm_steps.txt
args="--n 16384,65536,1048576 --order 5 --theta 0.5 --reps 10 --setup-reps 0"
timeout 120 $B/fmm_bench_old $args > $OUT/old.txt 2>&1; echo "old rc=$? at ${SECONDS}s"
timeout 120 $B/fmm_bench_new $args > $OUT/new.txt 2>&1; echo "new rc=$? at ${SECONDS}s"
timeout 100 $B/fmm_bench_new --n 1048576 --order 6 --theta 0.6 --reps 10 --setup-reps 0 --sample 300 > $OUT/new_p6.txt 2>&1
echo "new p6 rc=$? at ${SECONDS}s"
grep -hE "^## |^\| task DAG|^\| level graph|^level phases|^accuracy" $OUT/old.txt $OUT/new.txt $OUT/new_p6.txt | cut -c1-230
for n in 1M 16M; do
  [ $SECONDS -lt 480 ] || break
  steps=10; sample=1000; [ $n = 16M ] && { steps=3; sample=300; }
  timeout 100 $B/nbody_new --backend gpu --n $n --steps $steps --check --check-sample $sample --solver fmm > $OUT/nbody_$n.txt 2>&1
  echo "nbody $n rc=$? at ${SECONDS}s"; grep -E "^(setup|fmm|step|check|result) " $OUT/nbody_$n.txt | cut -c1-160
done
