#!/usr/bin/env bash
# FMM task DAG, old shape against new, on one GPU, from a staged build (tools/gpu-stage of
# build/fmm-gpu into build/fmm-stage; its .tar.xz is unpacked when the folder is not there).
#   build/dstage/fmm_ab.sh [STAGE_DIR]        # writes under $OUT/fmm_ab (or /tmp/fmm_ab)
# 1. the FMM's GPU tests (DAG in every scheduler mode; device-built DAG = host DAG for every
#    m2l_wait_levels; the coarse DAG bit for bit the fine one), 2. the benchmark: order 6, theta 0.5,
#    Plummer 64k and 1M, DAG with m2l waiting for each source (0) and for ancestors 1 and 2 levels
#    up, against the level graph (serial, and P2P on a branch), all in one process, interleaved.
set -u
stage=${1:-build/fmm-stage}
if [ ! -d "$stage" ]; then
  tar xJf "$stage.tar.xz" -C "$(dirname "$stage")" || { echo "fmm_ab: no $stage and no $stage.tar.xz" >&2; exit 1; }
fi
out=${OUT:-/tmp}/fmm_ab
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee "$out/gpu.txt"
for t in fmm_gpu_evaluate_gpu_test fmm_device_lists_gpu_test; do
  timeout 120 "$stage/tests/gpu/fmm/$t" --gtest_color=no > "$out/$t.txt" 2>&1
  echo "$t rc=$?: $(grep -cE '^\[       OK' "$out/$t.txt") OK, $(grep -cE '^\[  FAILED' "$out/$t.txt") FAILED lines"
  grep -E '^\[  FAILED|Failure' "$out/$t.txt" | head -5
done
timeout 300 "$stage/trees/fmm/canopy_fmm_gpu_bench" --n 65536,1048576 --order 6 --theta 0.5 --reps 15 \
  --m2l-wait-levels 0,1,2 > "$out/bench_p6.txt" 2>&1
echo "bench rc=$?"
grep -E '^(## |DAG|tree:|\| |speed-up|accuracy|check .* after)' "$out/bench_p6.txt"
