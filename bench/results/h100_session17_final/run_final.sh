#!/bin/bash
# Seventeenth session, one device call on the final binaries (the gpu stage): tools/gpu-check, then
# the chains and a tree check against the sixteenth session's binary (build/abpack/old/canopy,
# 2ba42c5) alternating, two rounds. chain.dot: 100,000 tasks each depending on the one before;
# deep.dot: dag_probe's 100,003-task deep DAG (tests/common/random_dag.hpp, deep, seed 1) as DOT.
# From the repository root on the device, after unpacking build/gpu-stage.tar.xz and build/abpack.tar.xz.
O=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/device.txt"
GPU_CHECK_BUDGET_S=540 tools/gpu-check build/gpu-stage > "$O/gpucheck.txt" 2>&1
echo "gpu-check exit $?" >> "$O/gpucheck.txt"
B=build/abpack
for round in 1 2; do
  for v in old new; do
    C=$B/old/canopy
    [ $v = new ] && C=build/gpu-stage/tools/canopy
    echo "=== round $round $v: run-dag chain.dot, continuation, full grid"
    for k in 1 2 3; do $C run-dag $B/chain.dot --backend gpu 2>&1 | grep -E "^time|^result"; done
    echo "=== round $round $v: run-dag deep.dot, continuation, full grid"
    for k in 1 2; do $C run-dag $B/deep.dot --backend gpu 2>&1 | grep -E "^time|^result"; done
    echo "=== round $round $v: bench 16M"
    $C --log-level warn bench --dist plummer -n 16M --max-leaf 32 --modes continuation+twig,level-graph 2>&1 | grep -E "^  (continuation|level).* gpu"
    echo "=== round $round $v: bench depths 5,8"
    $C --log-level warn bench --depths 5,8 --modes continuation+twig,level-graph 2>&1 | grep -E "^  (continuation|level).* gpu"
  done
done > "$O/chains_ab.txt" 2>&1
tail -5 "$O/gpucheck.txt"
grep -E "===|^time" "$O/chains_ab.txt" | head -80
