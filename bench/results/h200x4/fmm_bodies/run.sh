#!/usr/bin/env bash
# FMM task bodies from registers (M2L a source per lane with the derivative tensor and the pair in
# registers, P2P with the leaf's points copied over idle lanes), and the cheapest (order, theta)
# for issue 40's accuracy (acc p50 <= 1.5e-4, p99 <= 5.3e-4), on one GPU, from a staged build
# (build/fmm-gpu's canopy_fmm_gpu_bench and the two FMM GPU tests in build/fmm-stage; its .tar.xz
# is unpacked when the folder is not there). Old bodies: the figures of
# bench/results/h200/fmm_dag_shapes/bench_p6.txt (order 6, theta 0.5: 64k graph 9.0 ms, DAG 11.7;
# 1M graph 105, DAG 124).
#   build/dstage/fmm_body.sh [STAGE_DIR]        # writes under $OUT/fmm_body (or /tmp/fmm_body)
# 1. the FMM's GPU tests (every order 4, 5, 6, 8 against the CPU; DAG in every scheduler mode;
#    device-built = host-built), 2. the benchmark: Plummer 64k and 1M, order 6 theta 0.5 (DAG shapes 0 and
#    2 of the recorded run), then the candidates, most likely first; each with its accuracy
#    against direct summation on 1000 sampled points. The bench checks every variant (each DAG
#    shape, then both level graphs) against the CPU before it stops on a disagreement, so a
#    failing run still says whether the level graph agrees. Everything ends by 295 s: no run
#    starts with less than 30 s left, and each is cut at what is left.
# Staged (here, after cmake --build build/fmm-gpu --target canopy_fmm_gpu_bench
# fmm_gpu_evaluate_gpu_test fmm_device_lists_gpu_test -j1):
#   mkdir -p build/fmm-stage && (cd build/fmm-gpu && tar cf - trees/fmm/canopy_fmm_gpu_bench \
#     tests/gpu/fmm/fmm_gpu_evaluate_gpu_test tests/gpu/fmm/fmm_device_lists_gpu_test) | (cd build/fmm-stage && tar xf -)
#   strip --strip-unneeded build/fmm-stage/trees/fmm/canopy_fmm_gpu_bench build/fmm-stage/tests/gpu/fmm/*
#   tar cf - -C build fmm-stage | xz -9 -T1 > build/fmm-stage.tar.xz
set -u
stage=${1:-build/fmm-stage}
if [ ! -d "$stage" ]; then
  tar xJf "$stage.tar.xz" -C "$(dirname "$stage")" || { echo "fmm_body: no $stage and no $stage.tar.xz" >&2; exit 1; }
fi
out=${OUT:-/tmp}/fmm_body
mkdir -p "$out"
t0=$(date +%s)
end_s=295
elapsed() { echo $(( $(date +%s) - t0 )); }
left() { echo $(( end_s - $(elapsed) )); }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee "$out/gpu.txt"
for t in fmm_gpu_evaluate_gpu_test fmm_device_lists_gpu_test; do
  timeout 75 "$stage/tests/gpu/fmm/$t" --gtest_color=no > "$out/$t.txt" 2>&1
  echo "$t rc=$?: $(grep -cE '^\[       OK' "$out/$t.txt") OK, $(grep -cE '^\[  FAILED' "$out/$t.txt") FAILED lines ($(elapsed) s)"
  grep -E '^\[  FAILED|Failure|^p [0-9]:' "$out/$t.txt" | head -12
done
# The check lines in one per size and time: how many, the largest difference and whose, and every
# one over the bound in full.
checks() {
  awk '/^## /{size=$3} /^check /{when=$(NF-8); d=$(NF-2); b=$NF; sub(/\)$/, "", b);
        name=$2; for (i = 3; i <= NF - 9; i++) name=name " " $i
        key=size " " when; n[key]++; if (!(key in w) || d + 0 > w[key] + 0) { w[key]=d; who[key]=name }
        if (!(d + 0 <= b + 0)) print "  OVER: " $0}
       END {for (k in n) printf "  checks %s: %d, largest %s (%s)\n", k, n[k], w[k], who[k]}' "$1" | sort
}
bench() {  # name, time limit in s, then the bench's arguments
  local name=$1 limit=$2; shift 2
  local l; l=$(left)
  if [ "$l" -lt 30 ]; then echo "== $name: skipped (time)"; return; fi
  if [ "$limit" -gt "$l" ]; then limit=$l; fi
  timeout "$limit" "$stage/trees/fmm/canopy_fmm_gpu_bench" --n 65536,1048576 --reps 10 --full-check 0 "$@" > "$out/bench_$name.txt" 2>&1
  echo "== $name rc=$? ($(elapsed) s)"
  grep -E '^(## |tree:|\| (task|level)|speed-up of the task DAG \(m2l waits for each source\)|accuracy|canopy_fmm)' "$out/bench_$name.txt"
  checks "$out/bench_$name.txt"
}
bench p6_t0.5 100 --order 6 --theta 0.5 --m2l-wait-levels 0,2
bench p5_t0.5 60 --order 5 --theta 0.5 --m2l-wait-levels 0
bench p6_t0.7 60 --order 6 --theta 0.7 --m2l-wait-levels 0
bench p5_t0.6 60 --order 5 --theta 0.6 --m2l-wait-levels 0
bench p4_t0.5 60 --order 4 --theta 0.5 --m2l-wait-levels 0
bench p6_t0.6 60 --order 6 --theta 0.6 --m2l-wait-levels 0
bench p5_t0.7 60 --order 5 --theta 0.7 --m2l-wait-levels 0
bench p4_t0.4 60 --order 4 --theta 0.4 --m2l-wait-levels 0
echo "total $(elapsed) s"
