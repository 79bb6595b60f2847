#!/bin/bash
# The FMM's set-up without DAG edges for the level graph (schedules::level_graph) and with its
# scratch from the device's memory pool (cudaMallocAsync), kept from build to build: the GPU tests
# of the FMM's device set-up and evaluator, the set-up stages at 1M and 16M Plummer points (each
# rep with the pool giving back and keeping), then the N-body step with --solver fmm (both
# schedules at 1M, the level graph at 16M Plummer and uniform). alloc.txt: alloc_bench.cu
# (nvcc -O2 -arch=sm_90), cudaMalloc/cudaFree against the pool by size. Run from the repository
# root on the device machine with stripped binaries in build/ab.
set -u
B=build/ab
[ -d $B/bin ] || tar xJf build/ab.tar.xz -C build
nvidia-smi -L
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH=${nccl_lib:+$nccl_lib:}${LD_LIBRARY_PATH:-}
for t in fmm_device_lists_gpu_test fmm_gpu_evaluate_gpu_test; do
  timeout 200 $B/bin/$t > $OUT/$t.txt 2>&1; echo "$t rc=$? at ${SECONDS}s"; grep -E '^\[  (PASSED|FAILED) ' $OUT/$t.txt
done
timeout 120 $B/bin/canopy_fmm_gpu_bench --n 1048576,16777216 --setup-only 1 --setup-reps 5 > $OUT/setup.txt 2>&1
echo "setup rc=$? at ${SECONDS}s"; grep -E '^\|' $OUT/setup.txt | grep -v -- '---'; grep -E '^pool' $OUT/setup.txt
run() { local name=$1; shift
  timeout 120 $B/bin/nbody --backend gpu "$@" > /tmp/nbody_$name.txt 2>&1; local rc=$?
  { echo "== nbody $name rc=$rc: $*"; cat /tmp/nbody_$name.txt; } >> "$OUT/nbody.txt"
  echo "== nbody $name rc=$rc at ${SECONDS}s: $*"; grep -E '^(setup|fmm|step|wall|check|result) ' /tmp/nbody_$name.txt | cut -c1-170; }
run fmm_graph_1M --n 1M --steps 10 --check --check-sample 1000 --solver fmm --fmm-schedule graph
run fmm_dag_1M --n 1M --steps 5 --check --check-sample 1000 --solver fmm --fmm-schedule dag
run fmm_graph_16M --n 16M --steps 3 --check --check-sample 300 --solver fmm --fmm-schedule graph
run fmm_graph_16M_uniform --n 16M --dist uniform --steps 3 --check --check-sample 300 --solver fmm --fmm-schedule graph
# first/: the same script on an earlier build whose scratch came from the device's default pool,
# its release threshold toggled per rep (0: give back; UINT64_MAX: keep), not kept: with 0 the
# set-up was slower than with cudaMalloc (16M evaluator 149 against 107 ms), so the pool became
# the caller's choice (null: cudaMalloc). final/: the build committed.
