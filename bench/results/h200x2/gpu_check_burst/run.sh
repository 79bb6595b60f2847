#!/usr/bin/env bash
# tools/gpu-check on a packed stage (tools/gpu-stage), the debug fingerprints left out for the
# device time (distributed steps on every GPU of the host), then the FMM bench's current table
# (order 5, theta 0.5, 64k and 1M) from the same stage on GPU 0.
set -u
rm -rf build/gpu-stage; tar xJf build/gpu-stage.tar.xz -C build; nvidia-smi -L
GPU_CHECK_SKIP='fingerprint-debug|release-equals-debug' GPU_CHECK_BUDGET_S=470 tools/gpu-check build/gpu-stage > $OUT/gpucheck.txt 2>&1
echo "gpu-check rc=$?"
grep -E "^[a-z].* (PASS|FAIL|SKIP)" $OUT/gpucheck.txt | cut -c1-150
tail -4 $OUT/gpucheck.txt
B=build/gpu-stage/trees/fmm/canopy_fmm_gpu_bench
CUDA_VISIBLE_DEVICES=0 timeout 100 $B --n 65536,1048576 --order 5 --theta 0.5 --reps 10 --setup-reps 0 > $OUT/bench_p5.txt 2>&1; echo "bench rc=$?"
grep -E "^\| task DAG|^\| level graph|^DAG timeline|^DAG critical chain \(|accuracy|^check .*after" $OUT/bench_p5.txt | cut -c1-220
