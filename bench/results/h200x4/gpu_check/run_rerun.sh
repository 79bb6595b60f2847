#!/usr/bin/env bash
# The gpu-check steps that failed in the full run (fixed since), then the FMM benchmark.
set -u
tar xJf build/gpu-stage.tar.xz -C build
GPU_CHECK_SKIP='^(runtime|trees|canopy_atomics|dag_gpu|bench|fmm_gpu_evaluate|example|nbody|python|sanitizer|validate|run-dag|gpu-|fmm-bench)' \
  GPU_CHECK_BUDGET_S=200 tools/gpu-check build/gpu-stage > "$OUT/gpucheck_rerun.txt" 2>&1
echo "gpu-check exit $?" >> "$OUT/gpucheck_rerun.txt"
grep -vE 'SKIPPED \(GPU_CHECK_SKIP\)' "$OUT/gpucheck_rerun.txt" | tail -12
mkdir -p "$OUT/fmm"
timeout 200 build/gpu-stage/trees/fmm/canopy_fmm_gpu_bench --n 65536,1048576 --order 6 --theta 0.5 --reps 20 > "$OUT/fmm/bench_p6.txt" 2>&1
echo "bench rc=$?"; tail -30 "$OUT/fmm/bench_p6.txt"
