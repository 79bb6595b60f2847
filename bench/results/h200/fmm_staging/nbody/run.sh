#!/bin/bash
# The N-body step with --solver fmm on the final staging code, its two schedules (--fmm-schedule
# graph, the new default, and dag), beside the Barnes-Hut walk, on one GPU: gpu-check's 8k steps,
# then Plummer 1M and 16M and uniform 16M, every check on. Then, at 1M points, the DAG with its m2l
# bodies staged (--staged-kinds 7,7) against the default (5,7) on a full grid and on two blocks an
# SM. Run from the repository root on the device machine with stripped binaries in build/ab.
set -u
B=build/ab
[ -d $B ] || tar xJf build/ab.tar.xz -C build
nvidia-smi -L
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH=${nccl_lib:+$nccl_lib:}${LD_LIBRARY_PATH:-}
for s in graph dag; do
  timeout 60 $B/nbody_new --n 8000 --steps 5 --dt 0.005 --theta 0.5 --softening 0.01 --check --check-sample 0 --max-drift 1e-5 \
    --backend gpu --solver fmm --fmm-schedule $s > $OUT/nbody_8k_$s.txt 2>&1; echo "nbody fmm 8k $s rc=$?"; grep "^result" $OUT/nbody_8k_$s.txt
done
run() { local name=$1; shift
  timeout 120 $B/nbody_new --backend gpu "$@" > /tmp/nbody_$name.txt 2>&1; local rc=$?
  { echo "== nbody $name rc=$rc: $*"; cat /tmp/nbody_$name.txt; } >> "$OUT/nbody.txt"
  echo "== nbody $name rc=$rc at ${SECONDS}s: $*"; grep -E '^(setup|fmm|forces|walk|step|check|result) ' /tmp/nbody_$name.txt | cut -c1-170; }
for s in graph dag; do
  run fmm_${s}_1M --n 1M --steps 10 --check --check-sample 1000 --solver fmm --fmm-schedule $s
  run fmm_${s}_16M --n 16M --steps 3 --check --check-sample 300 --solver fmm --fmm-schedule $s
  run fmm_${s}_16M_uniform --n 16M --dist uniform --steps 3 --check --check-sample 300 --solver fmm --fmm-schedule $s
done
run bh_16M --n 16M --steps 3 --check --check-sample 300
args="--n 1048576 --order 5 --theta 0.5 --reps 10 --setup-reps 0"
for b in 0 264; do
  for k in 5,7 7,7; do
    [ $SECONDS -lt 480 ] || break
    timeout 100 $B/fmm_bench_new $args --blocks $b --staged-kinds $k > $OUT/bench_blocks${b}_kinds${k/,/_}.txt 2>&1
    echo "bench blocks $b kinds $k rc=$? at ${SECONDS}s"
    grep -hE "^\| task DAG|^task bodies" $OUT/bench_blocks${b}_kinds${k/,/_}.txt | cut -c1-230
  done
done
