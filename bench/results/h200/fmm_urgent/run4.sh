#!/bin/bash
# The build of run3.sh: where the critical chain goes when every internal node's m2l and down
# tasks are urgent (height 1 first, so the bench's timeline and clocks are of it), 16k and 64k.
set -u
nvidia-smi -L
timeout 150 build/ab/bench_new --n 16384,65536 --order 5 --theta 0.5 --reps 10 --setup-reps 0 --urgent-heights 1,-1 > $OUT/new4.txt 2>&1; echo "rc=$?"
grep -hE "^## |^\| task DAG|^\| level graph|critical chain|DAG timeline|in task bodies" $OUT/new4.txt | cut -c1-400
