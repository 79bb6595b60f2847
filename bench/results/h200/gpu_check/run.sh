#!/usr/bin/env bash
# tools/gpu-check on one GPU from a packed stage (tools/gpu-stage), the debug fingerprints left out
# for the device time; the distributed steps skip themselves on one GPU.
set -u
rm -rf build/gpu-stage; tar xJf build/gpu-stage.tar.xz -C build; nvidia-smi -L
GPU_CHECK_SKIP='fingerprint-debug|release-equals-debug' GPU_CHECK_BUDGET_S=560 tools/gpu-check build/gpu-stage > $OUT/gpucheck.txt 2>&1
echo "rc=$?"
