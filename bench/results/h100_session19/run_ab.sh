#!/bin/bash
# Nineteenth session, one device call: the one-pass group_p2m (new) beside d742a9b's two-pass one
# (old), the same build otherwise; canopy bench alternating the builds, two rounds, one process per
# tree; then floor_probe of each build (the leaf level alone). From the repository root on the
# device, with build/ab/{old,new}/{canopy,floor_probe} carried.
O=${OUT:-/tmp}/ab; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/device.txt"
V=continuation+twig,warp-rounds+twig,level-graph
for round in 1 2; do
  for b in old new; do
    C=build/ab/$b/canopy
    $C --log-level warn bench --dist plummer -n 16M --max-leaf 32 --modes $V > "$O/p16M_${b}_$round.txt" 2>&1
    $C --log-level warn bench --dist plummer -n 1M --max-leaf 32 --modes $V > "$O/p1M_${b}_$round.txt" 2>&1
    $C --log-level warn bench --depths 5,7,8 --modes $V > "$O/d_${b}_$round.txt" 2>&1
  done
done
for f in "$O"/p16M_* "$O"/p1M_* "$O"/d_*; do echo "== $(basename $f)"; grep -E "^depth|^  (continuation|warp|level).* gpu|FAIL|error" $f; done
for b in old new; do timeout 150 build/ab/$b/floor_probe 15 > "$O/floor_$b.txt" 2>&1; echo "== floor $b"; cat "$O/floor_$b.txt"; done
cd "${OUT:-/tmp}" && tar cf ab.tar ab && rm -rf ab
