#!/bin/bash
# Why the DAG's m2l bodies run slower staged than streamed (docs/FMM.md): Nsight Compute on the
# persistent kernel of canopy_fmm_gpu_bench at 1M Plummer points (order 5, theta 0.5, code of
# 24921be), the DAG with the m2l bodies streamed (--staged-kinds 5,7, the default) and staged
# (7,7), one launch each after two, clocks left alone (--clock-control none, METHOD.md); then the
# level graph's M2L phase kernel staged, for comparison. Run from the repository root on the
# device machine with stripped binaries in build/ab.
set -u
B=build/ab
[ -d $B/bin ] || tar xJf build/ab.tar.xz -C build
nvidia-smi -L; uname -r
S="--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --section Occupancy --section ComputeWorkloadAnalysis --section InstructionStats --section LaunchStats"
args="--n 1048576 --order 5 --theta 0.5 --reps 1 --setup-reps 0"
for k in 5,7 7,7; do
  timeout 240 ncu --clock-control none -k regex:persistent_kernel --launch-skip 2 --launch-count 1 $S \
    $B/bin/canopy_fmm_gpu_bench_old $args --staged-kinds $k > $OUT/dag_kinds${k/,/_}.txt 2>&1
  echo "ncu dag kinds $k rc=$? at ${SECONDS}s"; grep -E 'Duration|Warp Cycles Per Issued|Issued Warp Per Scheduler|No Eligible|Achieved Occupancy|L1/TEX Hit|Shared|Bank' $OUT/dag_kinds${k/,/_}.txt | head -30
done
timeout 200 ncu --clock-control none -k regex:phase_kernel --launch-skip 0 --launch-count 60 --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
  $B/bin/canopy_fmm_gpu_bench_old $args --staged-kinds 5,7 > $OUT/phases.txt 2>&1
echo "ncu phases rc=$? at ${SECONDS}s"; grep -cE 'phase_kernel' $OUT/phases.txt
