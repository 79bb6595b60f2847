#!/usr/bin/env bash
# N-body step: Barnes-Hut against the FMM (defaults: order 5, theta 0.5, leaves of 32, warp-rounds),
# then the FMM bench (DAG against level graph, with the level phases' busy shares).
set -u
[ -d build/gpu-stage ] || tar xJf build/gpu-stage.tar.xz -C build
N=build/gpu-stage/examples/nbody/nbody
B=build/gpu-stage/trees/fmm/canopy_fmm_gpu_bench
out=${OUT:-/tmp}/z; mkdir -p "$out"
t0=$(date +%s)
nvidia-smi -L | head -1
run() { local name=$1 limit=$2; shift 2; local left=$(( ${LIMIT:-580} - ($(date +%s) - t0) )); [ $left -lt 20 ] && { echo "skip $name"; return; }
  [ $limit -gt $left ] && limit=$left
  local s=$(date +%s); timeout $limit "$N" --backend gpu "$@" > "$out/$name.txt" 2>&1; local rc=$?
  echo "== $name rc=$rc ($(( $(date +%s) - s )) s): $*"; cat "$out/$name.txt" >> "$out/nbody.txt"
  grep -E '^(solver|backend|octree|build|setup|graph|accumulate|forces|fmm|kick|step|dominant|check|result) ' "$out/$name.txt" | cut -c1-230; }
run bh_1M 90 --n 1M --steps 10 --check --check-sample 1000
run fmm_1M 90 --n 1M --steps 10 --check --check-sample 1000 --solver fmm
run bh_16M 150 --n 16M --steps 3 --check --check-sample 300
run fmm_16M 150 --n 16M --steps 3 --check --check-sample 300 --solver fmm
run bh_16M_uniform 150 --n 16M --steps 3 --check --check-sample 300 --dist uniform
run fmm_16M_uniform 150 --n 16M --steps 3 --check --check-sample 300 --dist uniform --solver fmm
left=$(( ${LIMIT:-580} - ($(date +%s) - t0) ))
if [ $left -gt 60 ]; then
  timeout $left $B --n 65536,1048576 --order 5 --theta 0.5 --m2l-wait-levels 0 --reps 10 > "$out/bench.txt" 2>&1; echo "bench rc=$?"
  grep -E "^## |^tree|level phases|^\| (task|level)|clocks|DAG run|speed-up|accuracy|disagree|canopy_fmm" "$out/bench.txt"
fi
echo "total $(( $(date +%s) - t0 )) s"
