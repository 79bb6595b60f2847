#!/bin/bash
# Sixteenth session, A/B of the arrival's memory order (release + acquire fence on the last
# arriver; a DAG task's successors' arrivals issued together). build/abpack/{before,after} hold
# the binaries of 45201b4 and of the change; run from the repository root on the device.
B=build/abpack
O=${OUT:-/tmp}/ab
mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/device.txt"
(cuobjdump -sass -fun atomic_chain $B/after/hop_probe 2>&1 || cuobjdump -sass $B/after/hop_probe) \
  | grep -E "Function|MEMBAR|CCTL|FENCE|ATOM|RED|ERRBAR" > "$O/sass_hop_probe.txt" 2>&1
$B/after/hop_probe > "$O/hop_probe.txt" 2>&1
for round in 1 2; do
  for v in before after; do
    echo "=== round $round $v: run-dag chain.dot (100,000-task chain), continuation, full grid"
    for k in 1 2 3; do $B/$v/canopy run-dag $B/chain.dot --backend gpu 2>&1 | grep -E "^time|^result"; done
    echo "=== round $round $v: dag_probe"
    $B/$v/dag_probe 2>&1 | grep "rep 1"
    echo "=== round $round $v: bench 16M"
    $B/$v/canopy bench --dist plummer -n 16M --max-leaf 32 --modes continuation+twig,lockfree-tree+twig,level-graph --reps 20 2>&1 | grep -E "^  (continuation|lockfree|level)"
    echo "=== round $round $v: bench 1M"
    $B/$v/canopy bench --dist plummer -n 1M --max-leaf 32 --modes continuation+twig,lockfree-tree+twig,level-graph --reps 20 2>&1 | grep -E "^  (continuation|lockfree|level)"
    echo "=== round $round $v: bench depths 5,8"
    $B/$v/canopy bench --depths 5,8 --modes continuation+twig,lockfree-tree+twig,continuation,level-graph --reps 20 2>&1 | grep -E "^  (continuation|lockfree|level)|^complete|depth"
  done
done > "$O/ab_arrive.txt" 2>&1
cd "${OUT:-/tmp}" && tar czf ab.tgz ab && rm -rf ab
