#!/usr/bin/env bash
# tools/gpu-check on a packed stage (tools/gpu-stage) of the p2p order and dealt sources, the
# debug fingerprints left out for the device time (distributed steps on every GPU of the host).
# Run from the repository root; the FMM's tables from the same stage followed on a second
# machine (bench/results/h200/fmm_dealt/extras.sh; that call got an H200).
set -u
rm -rf build/gpu-stage; tar xJf build/gpu-stage.tar.xz -C build; nvidia-smi -L
GPU_CHECK_SKIP='fingerprint-debug|release-equals-debug' GPU_CHECK_BUDGET_S=500 tools/gpu-check build/gpu-stage > $OUT/gpucheck.txt 2>&1
echo "gpu-check rc=$?"
grep -E "^[a-z].* (PASS|FAIL|SKIP)" $OUT/gpucheck.txt | cut -c1-150
tail -4 $OUT/gpucheck.txt
