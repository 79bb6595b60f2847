#!/bin/bash
# tools/gpu-check on the stage behind the current tables (every object of build/gpu with its header
# dependencies recorded; the Python module staged with its shared libraries), one device call.
O=${OUT:-/tmp}/gpucheck_final; mkdir -p "$O"
tar xJf build/gpu-stage.tar.xz -C build
GPU_CHECK_BUDGET_S=500 tools/gpu-check build/gpu-stage > "$O/gpucheck.txt" 2>&1
echo "gpu-check exit $?" >> "$O/gpucheck.txt"
tail -45 "$O/gpucheck.txt"
cd "${OUT:-/tmp}" && tar cJf gpucheck_final.tar.xz gpucheck_final && rm -rf gpucheck_final
