#!/bin/bash
# Sixteenth session, two experiments against the kept change ("lanes"): treeonly (execute_chain
# and the batch resolution compiled for tree graphs only: what the DAG code costs a tree kernel)
# and maxchain (a climbing chain cut every 1,024 hops instead of 64: DAG chains only).
B=build/abpack
O=${OUT:-/tmp}/ab
mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/device.txt"
for round in 1 2; do
  for v in lanes treeonly; do
    echo "=== round $round $v: bench 16M"
    $B/$v/canopy bench --dist plummer -n 16M --max-leaf 32 --modes continuation+twig,lockfree-tree+twig,level-graph --reps 20 2>&1 | grep -E "^  (continuation|lockfree|level).*ok"
    echo "=== round $round $v: bench 1M"
    $B/$v/canopy bench --dist plummer -n 1M --max-leaf 32 --modes continuation+twig,lockfree-tree+twig,level-graph --reps 20 2>&1 | grep -E "^  (continuation|lockfree|level).*ok"
    echo "=== round $round $v: bench depths 5,8"
    $B/$v/canopy bench --depths 5,8 --modes continuation+twig,lockfree-tree+twig,level-graph --reps 20 2>&1 | grep -E "^  (continuation|lockfree|level).*ok|per pass"
  done
  for v in lanes maxchain; do
    echo "=== round $round $v: run-dag chain.dot (100,000-task chain), continuation, full grid"
    for k in 1 2 3; do $B/$v/canopy run-dag $B/chain.dot --backend gpu 2>&1 | grep -E "^time|^result"; done
    echo "=== round $round $v: run-dag deep.dot (dag_probe's 100,003-task deep DAG), continuation, full grid"
    for k in 1 2; do $B/$v/canopy run-dag $B/deep.dot --backend gpu 2>&1 | grep -E "^time|^result"; done
    echo "=== round $round $v: dag_probe"
    $B/$v/dag_probe 2>&1 | grep "rep 1"
  done
done > "$O/ab_treeonly_maxchain.txt" 2>&1
cd "${OUT:-/tmp}" && tar czf ab.tgz ab && rm -rf ab
