#!/usr/bin/env bash
# tools/gpu-check on a packed stage (tools/gpu-stage) of the urgent tasks and the queues' fetch_sub
# pops, on one GPU (the distributed steps need two and skip), the debug fingerprints left out for
# the device time; then the FMM bench with every m2l and down task urgent (height 0) beside none,
# after the group reservation (bench/results/h200/fmm_urgent/ has the builds before it).
# Run from the repository root; the folder is named for the card the call got afterwards.
set -u
rm -rf build/gpu-stage; tar xJf build/gpu-stage.tar.xz -C build; nvidia-smi -L
GPU_CHECK_SKIP='fingerprint-debug|release-equals-debug' GPU_CHECK_BUDGET_S=430 tools/gpu-check build/gpu-stage > $OUT/gpucheck.txt 2>&1
echo "gpu-check rc=$? at ${SECONDS}s"
grep -E "^[a-z].* (PASS|FAIL|SKIP)" $OUT/gpucheck.txt | cut -c1-150
tail -4 $OUT/gpucheck.txt
timeout $((570 - SECONDS)) build/gpu-stage/trees/fmm/canopy_fmm_gpu_bench --n 65536,1048576 --reps 10 --setup-reps 0 --urgent-heights 0,-1 > $OUT/bench_h0.txt 2>&1
echo "bench rc=$? at ${SECONDS}s"
grep -hE "^## |^\| task DAG|^\| level graph" $OUT/bench_h0.txt | cut -c1-150
