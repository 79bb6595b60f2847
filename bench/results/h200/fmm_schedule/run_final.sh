#!/usr/bin/env bash
set -u
rm -rf build/gpu-stage; tar xJf build/gpu-stage.tar.xz -C build
B=build/gpu-stage/trees/fmm/canopy_fmm_gpu_bench
out=${OUT:-/tmp}/b; mkdir -p "$out"
nvidia-smi -L | head -1
timeout 300 $B --n 65536,1048576 --order 5 --theta 0.5 --m2l-wait-levels 0 --reps 10 > "$out/bench.txt" 2>&1; echo "bench rc=$?"
grep -E "^## |^tree|level phases|^\| (task|level)|clocks|DAG run|speed-up|accuracy|disagree|canopy_fmm" "$out/bench.txt"
timeout 200 $B --n 1048576 --order 6 --theta 0.6 --m2l-wait-levels 0 --reps 10 --sample 300 > "$out/bench_p6.txt" 2>&1; echo "bench rc=$?"
grep -E "^## |^tree|level phases|^\| (task|level)|clocks|DAG run|accuracy|disagree|canopy_fmm" "$out/bench_p6.txt"
