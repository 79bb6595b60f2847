#!/usr/bin/env bash
# tools/gpu-check on the stage, on the 4-GPU host (the distributed steps run there).
set -u
tar xJf build/gpu-stage.tar.xz -C build
GPU_CHECK_BUDGET_S=565 tools/gpu-check build/gpu-stage > "$OUT/gpucheck.txt" 2>&1
echo "gpu-check exit $?" >> "$OUT/gpucheck.txt"
tail -60 "$OUT/gpucheck.txt"
