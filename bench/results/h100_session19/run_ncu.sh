#!/bin/bash
# Nineteenth session: ncu over one warm warp-rounds+twig pass and one continuation+twig pass at
# Plummer 16M (the new one-pass P2M build) and over floor_probe's plain twig-sources kernel, for
# occupancy, memory throughput and stall reasons side by side.
O=${OUT:-/tmp}/ncu; mkdir -p "$O"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" > "$O/ncu_path.txt"
S="--section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats"
for m in warp-rounds+twig continuation+twig; do
  $NCU --clock-control none -k regex:persistent_kernel --launch-skip 2 --launch-count 1 $S \
    build/ab/new/canopy --log-level warn bench --dist plummer -n 16M --max-leaf 32 --modes $m --reps 3 --warmup 1 > "$O/ncu_$m.txt" 2>&1
done
$NCU --clock-control none -k regex:run_sources --launch-skip 2 --launch-count 1 $S build/ab/new/floor_probe 5 > "$O/ncu_sources.txt" 2>&1
for f in "$O"/ncu_*.txt; do echo "== $f"; grep -E "Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Duration|DRAM Throughput|Memory Throughput|L2 Hit|Warp Cycles Per Issued|Issued Warp|No Eligible|Grid Size|Block Size|Stall|==PROF==|Error" "$f" | head -40; done
cd "${OUT:-/tmp}" && tar cf ncu.tar ncu && rm -rf ncu
