#!/bin/bash
# Twentieth session: group_p2m's out-of-range slots no longer default to p0 in the load (old =
# a81a8d7's build, new = the change), alternated twice in one call, stream and e2e medians.
O=${OUT:-/tmp}/ab; mkdir -p "$O"
tar xJf build/ab20.tar.xz -C build
V=continuation+twig,warp-rounds+twig,lockfree-tree+twig,level-graph
for round in 1 2; do
  for b in old new; do
    C=build/ab20/$b/canopy
    $C --log-level warn bench --depths 5,7,8 --modes $V --json "$O/d_${b}_$round.json" > "$O/d_${b}_$round.txt" 2>&1
    $C --log-level warn bench --dist plummer -n 1M --max-leaf 32 --modes $V --json "$O/p1M_${b}_$round.json" > "$O/p1M_${b}_$round.txt" 2>&1
    $C --log-level warn bench --dist plummer -n 16M --max-leaf 32 --modes $V --json "$O/p16M_${b}_$round.json" > "$O/p16M_${b}_$round.txt" 2>&1
  done
done
for f in "$O"/*.txt; do echo "== $(basename $f)"; grep -E "^depth|^  [a-z+-]+ +gpu" $f | cut -c1-90; done
cd "${OUT:-/tmp}" && tar cJf ab.tar.xz ab && rm -rf ab
