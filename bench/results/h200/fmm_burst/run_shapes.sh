#!/usr/bin/env bash
# The 64k FMM DAG with the batched push, by dag_shape::m2l_wait_levels (0: each source; 1, 2: its
# ancestor one or two levels up, so up tasks with thousands of successors) and by P2P part size.
set -u
out=${OUT:-/tmp}; nvidia-smi -L | head -1
timeout 100 build/gpu/trees/fmm/canopy_fmm_gpu_bench --n 65536 --order 5 --theta 0.5 --reps 10 --setup-reps 0 --m2l-wait-levels 0,1,2 > $out/wait_levels_64k.txt 2>&1; echo "rc=$?"
timeout 60 build/gpu/trees/fmm/canopy_fmm_gpu_bench --n 65536 --order 5 --theta 0.5 --reps 10 --setup-reps 0 --p2p-part 4096 > $out/p2p_part_4096_64k.txt 2>&1; echo "rc=$?"
grep -hE "^DAG shape|^\| task DAG|^\| level graph \(P2P|^DAG timeline|^DAG critical chain \(" $out/*.txt | cut -c1-230
