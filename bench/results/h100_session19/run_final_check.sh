#!/bin/bash
# Nineteenth session's last device call: tools/gpu-check on the final stage (a81a8d7: the division
# mend), then the final canopy on the trees of the table's targets, one round, to set beside final/.
O=${OUT:-/tmp}/gpucheck; mkdir -p "$O"
GPU_CHECK_BUDGET_S=470 tools/gpu-check build/gpu-stage > "$O/gpucheck.txt" 2>&1
echo "gpu-check exit $?" >> "$O/gpucheck.txt"
C=build/gpu-stage/tools/canopy V=continuation+twig,warp-rounds+twig,level-graph
$C --log-level warn bench --dist plummer -n 16M --max-leaf 32 --modes $V > "$O/p16M.txt" 2>&1
$C --log-level warn bench --dist plummer -n 1M --max-leaf 32 --modes $V > "$O/p1M.txt" 2>&1
$C --log-level warn bench --depths 5,8 --modes $V > "$O/d58.txt" 2>&1
tail -42 "$O/gpucheck.txt"
for f in "$O"/p16M.txt "$O"/p1M.txt "$O"/d58.txt; do echo "== $(basename $f)"; grep -E "^depth|^  [a-z+-]+ +gpu" $f | cut -c1-100; done
cd "${OUT:-/tmp}" && tar cJf gpucheck.tar.xz gpucheck && rm -rf gpucheck
