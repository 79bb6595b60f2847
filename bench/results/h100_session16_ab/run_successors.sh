#!/bin/bash
# Sixteenth session, A/B/C of a DAG task's arrivals: before (45201b4), lanes (the group's lanes
# arrive at the successors at once; a lane with several issues them together), preload (lanes +
# the successor range and first successor loaded before the task runs). Trees run the same code
# in all three (checked for a change in registers or time). From the repository root on the device.
B=build/abpack
O=${OUT:-/tmp}/ab
mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/device.txt"
$B/lanes/hop_probe > "$O/hop_probe.txt" 2>&1
# Registers and stack of every persistent kernel of the three builds (tree kernels must not change).
for v in before lanes preload; do cuobjdump -res-usage $B/$v/canopy > "$O/res_$v.txt" 2>&1; done
for round in 1 2; do
  for v in before lanes preload; do
    echo "=== round $round $v: run-dag chain.dot (100,000-task chain), continuation, full grid"
    for k in 1 2 3; do $B/$v/canopy run-dag $B/chain.dot --backend gpu 2>&1 | grep -E "^time|^result"; done
    echo "=== round $round $v: run-dag deep.dot (dag_probe's 100,003-task deep DAG), continuation, full grid"
    for k in 1 2; do $B/$v/canopy run-dag $B/deep.dot --backend gpu 2>&1 | grep -E "^time|^result"; done
    echo "=== round $round $v: dag_probe"
    $B/$v/dag_probe 2>&1 | grep "rep 1"
    echo "=== round $round $v: bench 16M"
    $B/$v/canopy bench --dist plummer -n 16M --max-leaf 32 --modes continuation+twig,level-graph --reps 20 2>&1 | grep -E "^  (continuation|lockfree|level).*ok"
    echo "=== round $round $v: bench depths 5,8"
    $B/$v/canopy bench --depths 5,8 --modes continuation+twig,level-graph --reps 20 2>&1 | grep -E "^  (continuation|lockfree|level).*ok|per pass"
  done
done > "$O/ab_successors.txt" 2>&1
cd "${OUT:-/tmp}" && tar czf ab.tgz ab && rm -rf ab
