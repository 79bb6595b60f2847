#!/bin/bash
# Nineteenth session: tools/gpu-check on the final stage (commit a70508f's device code). From the
# repository root on the device, after unpacking build/gpu-stage.tar.xz.
O=${OUT:-/tmp}/gpucheck; mkdir -p "$O"
GPU_CHECK_BUDGET_S=490 tools/gpu-check build/gpu-stage > "$O/gpucheck.txt" 2>&1
echo "gpu-check exit $?" >> "$O/gpucheck.txt"
cp -r build/gpu-stage-logs "$O/logs" 2>/dev/null
tail -45 "$O/gpucheck.txt"
cd "${OUT:-/tmp}" && tar cJf gpucheck.tar.xz gpucheck && rm -rf gpucheck
