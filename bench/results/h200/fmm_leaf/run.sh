#!/bin/bash
# The N-body step with --solver fmm (level graph, order 5, theta 0.5) by leaf size, at 1M and 16M
# Plummer bodies, every check on (code of 24921be); then Nsight Compute's duration of each kernel
# of one 16M step's level graph (where the evaluation's time goes at that size). Run from the
# repository root on the device machine with stripped binaries in build/ab.
set -u
B=build/ab
[ -d $B/bin ] || tar xJf build/ab.tar.xz -C build
nvidia-smi -L
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH=${nccl_lib:+$nccl_lib:}${LD_LIBRARY_PATH:-}
run() { local name=$1; shift
  timeout 120 $B/bin/nbody --backend gpu "$@" > /tmp/nbody_$name.txt 2>&1; local rc=$?
  { echo "== nbody $name rc=$rc: $*"; cat /tmp/nbody_$name.txt; } >> "$OUT/nbody.txt"
  echo "== nbody $name rc=$rc at ${SECONDS}s: $*"; grep -E '^(setup|fmm|step|check +accuracy +start|result) ' /tmp/nbody_$name.txt | cut -c1-150; }
for leaf in 24 32 48 64; do
  run leaf${leaf}_16M --n 16M --steps 3 --check --check-sample 300 --solver fmm --max-leaf $leaf
done
for leaf in 24 32 48 64; do
  run leaf${leaf}_1M --n 1M --steps 10 --check --check-sample 1000 --solver fmm --max-leaf $leaf
done
timeout 240 ncu --clock-control none -k regex:phase_kernel --launch-count 27 --section SpeedOfLight \
  $B/bin/nbody --backend gpu --n 16M --steps 1 --solver fmm > /tmp/ncu16M.txt 2>&1
echo "ncu rc=$? at ${SECONDS}s"
grep -E '^  void phase_kernel|Duration' /tmp/ncu16M.txt > $OUT/ncu_16M_kernels.txt
awk '/void phase_kernel/ {k=$2 $3} /Duration/ {u=$2; v=$3; if (u=="ms") v*=1000; s[k]+=v} END {for (k in s) printf "%s %.1f us\n", k, s[k]}' $OUT/ncu_16M_kernels.txt
