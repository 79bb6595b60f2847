#!/bin/bash
# After the runtime counted the kernel's static shared memory (0f0e8dd), on one GPU: the runtime's
# GPU scheduler tests and the FMM's GPU tests (large private queues beside the slabs among them).
# Run from the repository root on the device machine with stripped binaries in build/ab (carried).
set -u
B=build/ab
[ -d $B ] || tar xJf build/ab.tar.xz -C build
nvidia-smi -L
for t in fmm_gpu_evaluate_gpu_test fmm_device_lists_gpu_test runtime_gpu_scheduler_test; do
  timeout 200 $B/$t > $OUT/tests_$t.txt 2>&1; echo "$t rc=$? at ${SECONDS}s"; grep -E "^\[  (PASSED|FAILED) |FAILED" $OUT/tests_$t.txt | head -8
done
