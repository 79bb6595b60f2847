#!/bin/bash
# gpu-check's FMM steps on the binaries of 5a0bbec (staging, the order-5 M2L phase capped at 128
# registers), on one GPU: the FMM's two GPU test programs, the N-body step with the FMM at 8k
# bodies by both schedules, the FMM bench at 64k (order 6) and at 64k and 1M (order 5). Run from
# the repository root on the device machine with stripped binaries in build/ab (carried).
set -u
B=build/ab
[ -d $B ] || tar xJf build/ab.tar.xz -C build
nvidia-smi -L
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH=${nccl_lib:+$nccl_lib:}${LD_LIBRARY_PATH:-}
for t in fmm_gpu_evaluate_gpu_test fmm_device_lists_gpu_test; do
  timeout 150 $B/$t > $OUT/tests_$t.txt 2>&1; echo "$t rc=$? at ${SECONDS}s"; grep -E "^\[  (PASSED|FAILED) |FAILED" $OUT/tests_$t.txt | head -8
done
for s in graph dag; do
  timeout 60 $B/nbody --n 8000 --steps 5 --dt 0.005 --theta 0.5 --softening 0.01 --check --check-sample 0 --max-drift 1e-5 \
    --backend gpu --solver fmm --fmm-schedule $s > $OUT/nbody_8k_$s.txt 2>&1; echo "nbody fmm 8k $s rc=$?"; grep "^result" $OUT/nbody_8k_$s.txt
done
timeout 90 $B/fmm_bench --n 65536 --order 6 --reps 5 > $OUT/bench_64k_p6.txt 2>&1; echo "fmm bench 64k p6 rc=$? at ${SECONDS}s"
timeout 120 $B/fmm_bench --n 65536,1048576 --order 5 --reps 10 --setup-reps 0 > $OUT/bench_p5.txt 2>&1; echo "fmm bench p5 rc=$? at ${SECONDS}s"
grep -hE "^## |^\| task DAG|^\| level graph|^level phases" $OUT/bench_64k_p6.txt $OUT/bench_p5.txt | cut -c1-200
