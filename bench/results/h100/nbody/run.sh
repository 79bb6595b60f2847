#!/bin/sh
# The resident GPU N-body (issue 21) on the device: the GPU test's case, then the step breakdown at
# 1M, 4M and 16M Plummer bodies, and the previous (host-build) binary at 1M for comparison.
# Usage (repository root, on the GPU machine): sh bench/results/h100/nbody/run.sh BIN OLD_BIN OUT_DIR
set -u
bin=$1; old=$2; out=$3
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt"
"$bin" --n 8000 --steps 20 --dt 0.005 --theta 0.5 --softening 0.01 --check --check-sample 0 --max-drift 1e-5 --backend gpu > "$out/test_8000.txt" 2>&1; echo "test_8000 rc=$?"
"$bin" --n 1M --steps 10 --backend gpu --check > "$out/nbody_1M.txt" 2>&1; echo "1M rc=$?"
"$bin" --n 4M --steps 10 --backend gpu --diag-every 5 --check > "$out/nbody_4M.txt" 2>&1; echo "4M rc=$?"
"$bin" --n 16M --steps 5 --backend gpu --diag-every 5 --check > "$out/nbody_16M.txt" 2>&1; echo "16M rc=$?"
[ -x "$old" ] && { "$old" --n 1M --steps 5 --backend gpu > "$out/old_nbody_1M.txt" 2>&1; echo "old 1M rc=$?"; }
for f in "$out"/*.txt; do echo "== $f"; grep -v "^ *[0-9]* *[0-9.]* |" "$f" | tail -25; done
