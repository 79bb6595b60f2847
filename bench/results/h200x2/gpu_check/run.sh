#!/usr/bin/env bash
set -u
rm -rf build/gpu-stage; tar xJf build/gpu-stage.tar.xz -C build
nvidia-smi -L
GPU_CHECK_SKIP='fingerprint-debug|release-equals-debug' GPU_CHECK_BUDGET_S=575 tools/gpu-check build/gpu-stage > $OUT/gpucheck.txt 2>&1
echo "rc=$?"
grep -E "^[a-z].* (PASS|FAIL|SKIP)" $OUT/gpucheck.txt | tail -80 | cut -c1-180
tail -5 $OUT/gpucheck.txt
