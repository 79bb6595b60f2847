#!/bin/bash
# The final code's GPU checks of the FMM's set-up and the N-body example: fmm_device_lists_gpu_test
# (with the kept-pool test), the N-body GPU FMM tests (8,000 bodies, 20 steps, both schedules,
# every body against direct summation) and one 1M Plummer run with the defaults. Run from the
# repository root on the device machine with stripped binaries in build/ab/bin.
set -u
B=build/ab
[ -d $B/bin ] || tar xJf build/ab.tar.xz -C build
nvidia-smi -L
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH=${nccl_lib:+$nccl_lib:}${LD_LIBRARY_PATH:-}
timeout 200 $B/bin/fmm_device_lists_gpu_test > $OUT/fmm_device_lists_gpu_test.txt 2>&1
echo "fmm_device_lists_gpu_test rc=$?"; grep -E '^\[  (PASSED|FAILED) ' $OUT/fmm_device_lists_gpu_test.txt
args="--n 8000 --steps 20 --dt 0.005 --theta 0.5 --softening 0.01 --check --check-sample 0 --max-drift 1e-5"
for s in graph dag; do
  timeout 120 $B/bin/nbody $args --backend gpu --solver fmm --fmm-schedule $s > $OUT/nbody_8k_$s.txt 2>&1
  echo "nbody fmm 8k $s rc=$?"; grep -E '^result' $OUT/nbody_8k_$s.txt
done
timeout 120 $B/bin/nbody --backend gpu --solver fmm --n 1M --steps 10 --check --check-sample 1000 > $OUT/nbody_1M.txt 2>&1
echo "nbody 1M rc=$?"; grep -E '^(setup|fmm|step|result)' $OUT/nbody_1M.txt | cut -c1-160
