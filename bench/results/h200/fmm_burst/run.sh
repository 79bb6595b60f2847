#!/usr/bin/env bash
# A/B/C: the FMM bench before the runtime change (old), with the batched push (new), and with the
# batched push and the round-robin static sources (new2), alternating; then the scheduler tests.
set -u
out=${OUT:-/tmp}
nvidia-smi -L | head -1
b64() { echo "== $1 rep $2 64k" >> $out/ab_64k.txt; timeout 120 build/ab/bench_$1 --n 65536 --order 5 --theta 0.5 --reps 10 --setup-reps 0 >> $out/ab_64k.txt 2>&1; echo "64k $1 rc=$?"; }
b1m() { echo "== $1 rep $2 1M" >> $out/ab_1M.txt; timeout 150 build/ab/bench_$1 --n 1048576 --order 5 --theta 0.5 --reps 10 --setup-reps 0 --sample 300 >> $out/ab_1M.txt 2>&1; echo "1M $1 rc=$?"; }
b64 old 1; b64 new 1; b64 new2 1; b1m old 1; b1m new2 1
b64 old 2; b64 new2 2; b1m old 2; b1m new2 2
grep -E "^== |^\| task DAG|^\| level graph \(P2P|^DAG timeline|^DAG critical chain \(|^check task DAG.*after" $out/ab_*.txt | cut -c1-250
timeout 240 build/ab/gpu_scheduler_test > $out/sched.txt 2>&1; echo "sched rc=$?"
tail -4 $out/sched.txt
