#!/bin/bash
# Nineteenth session: the modes the A/B calls left out (lockfree-tree+twig, node tasks), d742a9b
# (old) beside the one-pass P2M (new), alternating, two rounds.
O=${OUT:-/tmp}/ab3; mkdir -p "$O"
V=lockfree-tree+twig,continuation,warp-rounds,continuation+twig
for round in 1 2; do
  for b in old new; do
    C=build/ab/$b/canopy
    $C --log-level warn bench --dist plummer -n 1M --max-leaf 32 --modes $V > "$O/p1M_${b}_$round.txt" 2>&1
    $C --log-level warn bench --dist plummer -n 16M --max-leaf 32 --modes $V > "$O/p16M_${b}_$round.txt" 2>&1
    $C --log-level warn bench --depths 7,8 --modes lockfree-tree+twig,continuation+twig > "$O/d_${b}_$round.txt" 2>&1
  done
done
for f in "$O"/*.txt; do echo "== $(basename $f)"; grep -E "^depth|^  [a-z+-]+ +gpu" $f | cut -c1-60; done
cd "${OUT:-/tmp}" && tar cf ab3.tar ab3 && rm -rf ab3
