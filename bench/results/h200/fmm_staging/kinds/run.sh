#!/bin/bash
# Which kinds should stage (gpu_evaluator::set_staged_kinds): the FMM bench with every kind staged
# (7), all but M2L (5) and none (0), beside the binary before staging (fmm_bench_old), on one GPU;
# the shared-memory slabs are in the kernels whatever the setting. Then the FMM's GPU tests. Run
# from the repository root on the device machine with stripped binaries in build/ab (carried).
set -u
B=build/ab
[ -d $B ] || tar xJf build/ab.tar.xz -C build
nvidia-smi -L
args="--n 65536,1048576 --order 5 --theta 0.5 --reps 10 --setup-reps 0"
timeout 100 $B/fmm_bench_old $args > $OUT/old.txt 2>&1; echo "old rc=$? at ${SECONDS}s"
for k in 7 5 0; do
  timeout 100 $B/fmm_bench_new $args --staged-kinds $k > $OUT/kinds_$k.txt 2>&1; echo "kinds $k rc=$? at ${SECONDS}s"
done
timeout 150 $B/fmm_gpu_evaluate_gpu_test > $OUT/tests.txt 2>&1; echo "fmm evaluate tests rc=$? at ${SECONDS}s"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" $OUT/tests.txt | head -20
for f in old kinds_7 kinds_5 kinds_0; do echo "== $f"; grep -hE "^## |^\| task DAG|^\| level graph|^level phases|^task bodies" $OUT/$f.txt | cut -c1-260; done
