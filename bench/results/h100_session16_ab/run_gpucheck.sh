#!/bin/bash
# Sixteenth session: tools/gpu-check on the final stage (after the device-graph test's mend).
GPU_CHECK_BUDGET_S=540 tools/gpu-check build/gpu-stage > "${OUT:-/tmp}/gpu_check_stdout.txt" 2>&1
echo "gpu-check exit $?" >> "${OUT:-/tmp}/gpu_check_stdout.txt"
