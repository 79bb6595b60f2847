#!/bin/bash
# bench/RESULTS.md's current upward-pass table: the staged canopy tool (commit 9f9b1c0's device code),
# one device call. From the repository root on the device, after unpacking build/gpu-stage.tar.xz.
# Plots: tools/plot/plot_bench.py d18.json -o d18 (and the same for p1M, p16M) on the build machine.
O=${OUT:-/tmp}/final; mkdir -p "$O"
tar xJf build/gpu-stage.tar.xz -C build
C=build/gpu-stage/tools/canopy
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/device.txt"
$C bench --depths 1-8 --modes continuation+twig,warp-rounds+twig,lockfree-tree+twig,continuation,baselines --json "$O/d18.json" > "$O/d18.txt" 2> "$O/d18.log"
$C bench --dist plummer -n 1M --max-leaf 32 --json "$O/p1M.json" > "$O/p1M.txt" 2> "$O/p1M.log"
$C bench --dist plummer -n 16M --max-leaf 32 --json "$O/p16M.json" > "$O/p16M.txt" 2> "$O/p16M.log"
grep -hE "^(depth|gen|plummer)|^  (continuation|warp|level-graph|last).* gpu" "$O/d18.txt" "$O/p1M.txt" "$O/p16M.txt"
cd "${OUT:-/tmp}" && tar cf final.tar final && rm -rf final
