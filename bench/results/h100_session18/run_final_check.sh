#!/bin/bash
# Eighteenth session's last device call: tools/gpu-check on the final stage (after the review's
# mends), then the final canopy beside 473a75d's (build/abpack/prev/canopy, the binary of the
# current table) on the trees, one round each, alternating. From the repository root on the device,
# after unpacking build/gpu-stage.tar.xz and build/abpack.tar.xz.
O=${OUT:-/tmp}/check; mkdir -p "$O"
GPU_CHECK_BUDGET_S=490 tools/gpu-check build/gpu-stage > "$O/gpucheck.txt" 2>&1
echo "gpu-check exit $?" >> "$O/gpucheck.txt"
V=continuation+twig,warp-rounds+twig,level-graph
for b in prev final; do
  C=build/abpack/prev/canopy; [ $b = final ] && C=build/gpu-stage/tools/canopy
  $C --log-level warn bench --dist plummer -n 16M --max-leaf 32 --modes $V > "$O/p16M_$b.txt" 2>&1
  $C --log-level warn bench --dist plummer -n 1M --max-leaf 32 --modes $V > "$O/p1M_$b.txt" 2>&1
  $C --log-level warn bench --depths 5,8 --modes $V > "$O/d_$b.txt" 2>&1
done
tail -42 "$O/gpucheck.txt"
for f in "$O"/p16M_* "$O"/p1M_* "$O"/d_*; do echo "== $(basename $f)"; grep -E "^depth|^  (continuation|warp|level).* gpu" $f; done
cd "${OUT:-/tmp}" && tar cf check.tar check && rm -rf check
