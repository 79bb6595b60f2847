#!/bin/bash
# Nineteenth session, second A/B call: d742a9b (old: two-pass P2M), the one-pass P2M with batches of
# 4 points a lane (new), the same without the scheduler's prefetch hints (nopf: CANOPY_PREFETCH_AHEAD=0),
# and the one-pass P2M with batches of 8 (b8); canopy bench alternating the builds, two rounds, one
# process per tree. From the repository root on the device, with build/ab/*/canopy carried.
O=${OUT:-/tmp}/ab2; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/device.txt"
V=continuation+twig,warp-rounds+twig,level-graph
for round in 1 2; do
  for b in old new nopf b8; do
    C=build/ab/$b/canopy
    $C --log-level warn bench --dist plummer -n 16M --max-leaf 32 --modes $V > "$O/p16M_${b}_$round.txt" 2>&1
    $C --log-level warn bench --dist plummer -n 1M --max-leaf 32 --modes $V > "$O/p1M_${b}_$round.txt" 2>&1
    $C --log-level warn bench --depths 5,7,8 --modes $V > "$O/d_${b}_$round.txt" 2>&1
  done
done
cd "${OUT:-/tmp}" && tar cf ab2.tar ab2
for t in p16M p1M d; do for b in old new nopf b8; do for round in 1 2; do
  echo "== ${t}_${b}_$round"; grep -E "^depth|^  (continuation|warp|level).* gpu|FAIL|rror" ab2/${t}_${b}_$round.txt | cut -c1-100
done; done; done
rm -rf ab2
