#!/bin/bash
# Sixteenth session, first call on the final binaries: tools/gpu-check over the stage, then the
# floor probe and the chains (build/abpack/final holds floor_probe and dag_probe of the same build).
S=build/gpu-stage/tools/canopy
B=build/abpack
O=${OUT:-/tmp}/check
mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/device.txt"
GPU_CHECK_BUDGET_S=480 tools/gpu-check build/gpu-stage > "$O/gpu_check.txt" 2>&1
echo "gpu-check exit $?" >> "$O/gpu_check.txt"
$B/final/floor_probe 30 > "$O/floor_probe.txt" 2>&1
{
  echo "=== run-dag chain.dot (100,000-task chain), continuation, full grid"
  for k in 1 2 3; do $S run-dag $B/chain.dot --backend gpu 2>&1 | grep -E "^time|^result"; done
  echo "=== run-dag deep.dot (dag_probe's 100,003-task deep DAG), continuation, full grid"
  for k in 1 2 3; do $S run-dag $B/deep.dot --backend gpu 2>&1 | grep -E "^time|^result"; done
  echo "=== dag_probe"
  $B/final/dag_probe 2>&1 | grep -v "^$"
} > "$O/chains.txt" 2>&1
cd "${OUT:-/tmp}" && tar czf check.tgz check && rm -rf check
