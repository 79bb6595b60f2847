#!/bin/bash
# Eighteenth session, one device call on the gpu stage: warp-rounds+twig beside continuation+twig
# and the baselines, in one process per tree, two rounds; then the kernels' registers are in
# kernel_registers.txt (made here, no GPU). From the repository root on the device, after
# unpacking build/gpu-stage.tar.xz.
O=${OUT:-/tmp}
C=build/gpu-stage/tools/canopy
V=continuation+twig,warp-rounds+twig,level-graph,last-arriver
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/device.txt"
for round in 1 2; do
  $C --log-level warn bench --dist plummer -n 16M --max-leaf 32 --modes $V --json "$O/p16M_$round.json" > "$O/p16M_$round.txt" 2>&1
  $C --log-level warn bench --dist plummer -n 1M --max-leaf 32 --modes $V --json "$O/p1M_$round.json" > "$O/p1M_$round.txt" 2>&1
  $C --log-level warn bench --depths 1,3,5,7,8 --modes $V --json "$O/d_$round.json" > "$O/d_$round.txt" 2>&1
done
grep -hE "^  (continuation|warp|level|last).* gpu|^(depth|plummer|Plummer)" "$O"/p16M_*.txt "$O"/p1M_*.txt "$O"/d_*.txt
