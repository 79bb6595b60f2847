#!/usr/bin/env bash
# After bench/results/h100x2/gpu_check_dealt/run.sh, from the same stage, on one GPU (its
# bench_p5.txt is stage_16k_64k_1M.txt here): the FMM bench at 16k, 64k and 1M
# (m2l tasks waiting for each source and for the parent of each), 16k with every source dealt,
# and the N-body step with the walk and the FMM (bench/RESULTS.md's tables).
set -u
[ -d build/gpu-stage ] || tar xJf build/gpu-stage.tar.xz -C build
export CUDA_VISIBLE_DEVICES=0
B=build/gpu-stage/trees/fmm/canopy_fmm_gpu_bench
N=build/gpu-stage/examples/nbody/nbody
nvidia-smi -L | head -1
timeout 150 $B --n 16384,65536,1048576 --order 5 --theta 0.5 --reps 10 --setup-reps 0 --m2l-wait-levels 0,1 > $OUT/bench_p5.txt 2>&1; echo "bench rc=$?"
timeout 60 $B --n 16384 --order 5 --theta 0.5 --reps 10 --setup-reps 0 --dealt-sources 2147483647 > $OUT/bench_16k_all_dealt.txt 2>&1; echo "bench all dealt rc=$?"
grep -hE "^## |^\| task DAG|^\| level graph|accuracy|^check .*after" $OUT/bench_p5.txt $OUT/bench_16k_all_dealt.txt | cut -c1-200
run() { local name=$1; shift
  timeout 150 "$N" --backend gpu "$@" > /tmp/nbody_$name.txt 2>&1; local rc=$?; echo "== nbody $name rc=$rc: $*"
  { echo "== nbody $name rc=$rc: $*"; cat /tmp/nbody_$name.txt; } >> "$OUT/nbody.txt"
  grep -E '^(setup|fmm|forces|step|wall|check|result) ' /tmp/nbody_$name.txt | cut -c1-180; }
run bh_1M --n 1M --steps 10 --check --check-sample 1000
run fmm_1M --n 1M --steps 10 --check --check-sample 1000 --solver fmm
run bh_16M --n 16M --steps 3 --check --check-sample 300
run fmm_16M --n 16M --steps 3 --check --check-sample 300 --solver fmm
run bh_16M_uniform --n 16M --steps 3 --check --check-sample 300 --dist uniform
run fmm_16M_uniform --n 16M --steps 3 --check --check-sample 300 --dist uniform --solver fmm
