#!/usr/bin/env bash
# 16M Plummer N-body step with the FMM at cheaper settings than the 1M-calibrated default (order 5,
# theta 0.5): the accuracy and time against p and theta at 16M.
set -u
rm -rf build/gpu-stage; tar xJf build/gpu-stage.tar.xz -C build
N=build/gpu-stage/examples/nbody/nbody
out=${OUT:-/tmp}/w; mkdir -p "$out"
t0=$(date +%s)
for a in "4 0.5" "5 0.6" "4 0.4"; do set -- $a
  left=$(( 250 - ($(date +%s) - t0) )); [ $left -lt 30 ] && { echo "skip $a"; continue; }
  timeout $left $N --backend gpu --n 16M --steps 3 --check --check-sample 300 --solver fmm --order $1 --theta $2 > "$out/fmm_16M_p$1_t$2.txt" 2>&1
  echo "== order $1 theta $2 rc=$?"; grep -E '^(octree|setup|fmm|step|check     accuracy|result) ' "$out/fmm_16M_p$1_t$2.txt" | cut -c1-200
done
echo "total $(( $(date +%s) - t0 )) s"
