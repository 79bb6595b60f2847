#!/bin/bash
# P2P bodies that load the next tile's source point before the current tile's interactions, against
# the code before (_old, 24921be): the FMM GPU tests, then canopy_fmm_gpu_bench at 64k and 1M
# Plummer points (the DAG, the level graphs and each phase alone), old and new alternated twice,
# then the N-body step at 16M Plummer bodies, old and new. Run from the repository root on the
# device machine with stripped binaries in build/ab.
set -u
B=build/ab
[ -d $B/bin ] || tar xJf build/ab.tar.xz -C build
nvidia-smi -L
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH=${nccl_lib:+$nccl_lib:}${LD_LIBRARY_PATH:-}
for t in fmm_device_lists_gpu_test fmm_gpu_evaluate_gpu_test; do
  timeout 200 $B/bin/$t > $OUT/$t.txt 2>&1; echo "$t rc=$? at ${SECONDS}s"; grep -E '^\[  (PASSED|FAILED) ' $OUT/$t.txt
done
for round in 1 2; do
  for v in old new; do
    b=$B/bin/canopy_fmm_gpu_bench; [ $v = old ] && b=${b}_old
    timeout 150 $b --n 65536,1048576 --reps 10 --setup-reps 0 > $OUT/bench_${v}_$round.txt 2>&1
    echo "bench $v round $round rc=$? at ${SECONDS}s"; grep -hE '^\| (task DAG|level graph)|^level phases|^check.*DIFF|FAIL' $OUT/bench_${v}_$round.txt | cut -c1-160
  done
done
for v in old new; do
  b=$B/bin/nbody; [ $v = old ] && b=${b}_old
  timeout 120 $b --backend gpu --n 16M --steps 3 --check --check-sample 300 --solver fmm > $OUT/nbody_16M_$v.txt 2>&1
  echo "nbody 16M $v rc=$?"; grep -E '^(setup|fmm|step|check +accuracy +start|result) ' $OUT/nbody_16M_$v.txt | cut -c1-150
done
# Result (not kept): no gain. 1M P2P phase 2586.6 / 2587.2 us before against 2617.9 / 2617.7 after,
# the level graph with the branch 6439.8 / 6435.2 against 6477.2 / 6465.2 us; 16M N-body
# evaluation 96.07 against 96.56 ms. The P2P bodies are not waiting on the tile's load.
