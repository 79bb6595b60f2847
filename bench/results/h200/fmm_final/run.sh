#!/usr/bin/env bash
# The FMM's current tables (bench/RESULTS.md, "The FMM as one task graph", "The N-body step with
# the FMM", "The FMM's set-up"): canopy_fmm_gpu_bench at 64k and 1M (order 5, theta 0.5; order 6,
# theta 0.6 at 1M), its set-up stages at 1M and 16M, and the N-body step with the walk and the
# FMM, from a packed stage (tools/gpu-stage). Run from the repository root on one GPU.
set -u
[ -d build/gpu-stage ] || tar xJf build/gpu-stage.tar.xz -C build
B=build/gpu-stage/trees/fmm/canopy_fmm_gpu_bench
N=build/gpu-stage/examples/nbody/nbody
out=${OUT:-/tmp}; mkdir -p "$out"
nvidia-smi -L | head -1
timeout 200 $B --n 65536,1048576 --order 5 --theta 0.5 --reps 10 > "$out/bench_p5.txt" 2>&1; echo "bench p5 rc=$?"
grep -E "^## |^DAG:|^check .*after|^\| |longest|DAG run|accuracy|disagree|canopy_fmm" "$out/bench_p5.txt" | grep -v "^|---" | cut -c1-300
timeout 120 $B --n 1048576 --order 6 --theta 0.6 --reps 10 --sample 300 --setup-reps 0 > "$out/bench_p6.txt" 2>&1; echo "bench p6 rc=$?"
grep -E "^## |^\| (task|level)|accuracy|disagree|canopy_fmm" "$out/bench_p6.txt" | cut -c1-200
timeout 100 $B --n 1048576,16777216 --setup-only 1 --setup-reps 5 > "$out/setup.txt" 2>&1; echo "setup rc=$?"
grep -E "^set-up|^\| [a-z]|beyond" "$out/setup.txt" | cut -c1-200
run() { local name=$1; shift
  timeout 150 "$N" --backend gpu "$@" > /tmp/nbody_$name.txt 2>&1; local rc=$?; echo "== nbody $name rc=$rc: $*"
  { echo "== nbody $name rc=$rc: $*"; cat /tmp/nbody_$name.txt; } >> "$out/nbody.txt"
  grep -E '^(setup|fmm|forces|step|wall|check|result) ' /tmp/nbody_$name.txt | cut -c1-180; }
run bh_1M --n 1M --steps 10 --check --check-sample 1000
run fmm_1M --n 1M --steps 10 --check --check-sample 1000 --solver fmm
run bh_16M --n 16M --steps 3 --check --check-sample 300
run fmm_16M --n 16M --steps 3 --check --check-sample 300 --solver fmm
run bh_16M_uniform --n 16M --steps 3 --check --check-sample 300 --dist uniform
run fmm_16M_uniform --n 16M --steps 3 --check --check-sample 300 --dist uniform --solver fmm
