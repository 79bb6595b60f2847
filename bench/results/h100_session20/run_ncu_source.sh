#!/bin/bash
# Twentieth session: where lockfree-tree+twig's warps wait since the one-pass P2M. ncu's
# per-instruction stall samples (SourceCounters) of one warm pass at depth 7, for d742a9b's
# binary (old, build/ab/old) and the final one (new, the staged tool of a81a8d7).
O=${OUT:-/tmp}/src; mkdir -p "$O"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
tar xJf build/ab.tar.xz -C build
for b in old new; do
  $NCU --clock-control none -k regex:persistent_kernel --launch-skip 2 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --import-source no -o "$O/$b" \
    build/ab/$b/canopy --log-level warn bench --depths 7 --modes lockfree-tree+twig --reps 3 --warmup 1 > "$O/$b.log" 2>&1
  $NCU --import "$O/$b.ncu-rep" --page source --csv --print-source sass > "$O/${b}_sass.csv" 2>"$O/${b}_sass.err"
  $NCU --import "$O/$b.ncu-rep" --page details --csv > "$O/${b}_details.csv" 2>&1
done
ls -la "$O"; head -c 600 "$O/new_sass.csv"; echo
cd "${OUT:-/tmp}" && rm -f src/*.ncu-rep && tar cJf src.tar.xz src && rm -rf src
