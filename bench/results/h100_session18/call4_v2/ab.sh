#!/bin/bash
# v2: the seventeenth session's warp rounds (continuation, da44b98 + warp_rounds_not_kept.diff); b: mode warp-rounds now.
O=${OUT:-/tmp}/ab; mkdir -p $O
for round in 1 2; do
  build/abpack/v2/canopy --log-level warn bench --dist plummer -n 16M --max-leaf 32 --modes continuation+twig,level-graph > $O/p16M_v2_$round.txt 2>&1
  build/abpack/b/canopy --log-level warn bench --dist plummer -n 16M --max-leaf 32 --modes warp-rounds+twig,continuation+twig,level-graph > $O/p16M_b_$round.txt 2>&1
done
cd ${OUT:-/tmp} && for f in ab/*.txt; do echo "== $f"; grep -E "^  (continuation|warp|level).* gpu" $f; done; tar cf ab.tar ab && rm -rf ab
