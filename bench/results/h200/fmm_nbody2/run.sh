#!/bin/bash
# The N-body step with --solver fmm on the code of cef2f54 (the level graph's evaluators without DAG
# edges, the set-up's scratch from a kept pool, P2P tiles in shared memory), both schedules: the
# 8k steps of the GPU suite, then Plummer 1M and 16M and uniform 16M, every check on; then the
# level graph at leaves of 48 and 64 (1M and 16M Plummer). Run from the repository root on the
# device machine with stripped binaries in build/ab.
set -u
B=build/ab
[ -d $B/bin ] || tar xJf build/ab.tar.xz -C build
nvidia-smi -L
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH=${nccl_lib:+$nccl_lib:}${LD_LIBRARY_PATH:-}
for s in graph dag; do
  timeout 60 $B/bin/nbody --n 8000 --steps 5 --dt 0.005 --theta 0.5 --softening 0.01 --check --check-sample 0 --max-drift 1e-5 \
    --backend gpu --solver fmm --fmm-schedule $s > $OUT/nbody_8k_$s.txt 2>&1; echo "nbody fmm 8k $s rc=$?"; grep "^result" $OUT/nbody_8k_$s.txt
done
run() { local name=$1; shift
  timeout 120 $B/bin/nbody --backend gpu "$@" > /tmp/nbody_$name.txt 2>&1; local rc=$?
  { echo "== nbody $name rc=$rc: $*"; cat /tmp/nbody_$name.txt; } >> "$OUT/nbody.txt"
  echo "== nbody $name rc=$rc at ${SECONDS}s: $*"; grep -E '^(setup|fmm|step|check +accuracy +start|result) ' /tmp/nbody_$name.txt | cut -c1-150; }
for s in graph dag; do
  run fmm_${s}_1M --n 1M --steps 10 --check --check-sample 1000 --solver fmm --fmm-schedule $s
  run fmm_${s}_16M --n 16M --steps 3 --check --check-sample 300 --solver fmm --fmm-schedule $s
  run fmm_${s}_16M_uniform --n 16M --dist uniform --steps 3 --check --check-sample 300 --solver fmm --fmm-schedule $s
done
for leaf in 48 64; do
  run leaf${leaf}_1M --n 1M --steps 10 --check --check-sample 1000 --solver fmm --max-leaf $leaf
  run leaf${leaf}_16M --n 16M --steps 3 --check --check-sample 300 --solver fmm --max-leaf $leaf
  run leaf${leaf}_16M_uniform --n 16M --dist uniform --steps 3 --check --check-sample 300 --solver fmm --max-leaf $leaf
done
