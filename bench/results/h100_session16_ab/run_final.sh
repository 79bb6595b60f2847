#!/bin/bash
# Sixteenth session, on the final binaries (the gpu stage's canopy; floor_probe and dag_probe from
# build/abpack/final): the current table (the README's commands), the floor probe with twig
# tasks on 1, 2 and 4 lanes a leaf, and the device-graph scheduler test mended after run_check.sh.
S=build/gpu-stage/tools/canopy
B=build/abpack
O=${OUT:-/tmp}/final
mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/device.txt"
$B/final/runtime_device_graph_scheduler_gpu_test > "$O/device_graph_scheduler_test.txt" 2>&1
echo "exit $?" >> "$O/device_graph_scheduler_test.txt"
$B/final/floor_probe 30 > "$O/floor_probe.txt" 2>&1
$S bench --dist plummer -n 16M --max-leaf 32 --json "$O/p16M.json" > "$O/p16M.txt" 2>&1
$S bench --dist plummer -n 1M --max-leaf 32 --json "$O/p1M.json" > "$O/p1M.txt" 2>&1
$S bench --depths 1-8 --modes continuation+twig,lockfree-tree+twig,continuation,baselines --json "$O/d18.json" > "$O/d18.txt" 2>&1
cd "${OUT:-/tmp}" && tar czf final.tgz final && rm -rf final
