#!/usr/bin/env bash
# Ad-hoc GPU probe used while tuning (not part of the suite): correctness first, then timings.
set -uo pipefail
B=${1:-build/gpu}
O=${OUT:-/tmp/out}; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== runtime gpu test"; $B/tests/gpu/runtime/runtime_gpu_scheduler_test 2>&1 | tail -3
echo "== baselines gpu test"; $B/tests/gpu/trees/trees_baselines_gpu_test 2>&1 | tail -2
echo "== atomics gpu test"; $B/tests/gpu/atomics/canopy_atomics_gpu_test 2>&1 | tail -2
C=$B/tools/canopy
for d in 5; do for m in continuation lockfree shared-queues lockfree-tree all-threads; do
  echo "== depth $d $m"; $C validate gen:lattice:$d:8 --backend gpu --mode $m --reps 50 --log-level warn 2>&1 | grep -E "compared|result"
done; done
for b in 132 264 528; do echo "== depth 5 continuation blocks $b"; $C validate gen:lattice:5:8 --backend gpu --mode continuation --blocks $b --reps 50 --log-level warn 2>&1 | grep -E "compared|result"; done
for t in 128 512; do echo "== depth 5 continuation threads $t"; $C validate gen:lattice:5:8 --backend gpu --mode continuation --threads $t --reps 50 --log-level warn 2>&1 | grep -E "compared|result"; done
for m in continuation lockfree; do echo "== depth 8 $m"; $C validate gen:lattice:8:8 --backend gpu --mode $m --reps 20 --log-level warn 2>&1 | grep -E "compared|result"; done
echo "== atomics lab"; timeout 200 $B/bench/atomics/canopy-atomics-lab --sizes 1M,16M,64M --json $O/atomics.json --plot-command "true" 2>&1 | tail -60
