#!/bin/bash
# Twentieth session, first device call: tools/gpu-check on the stage of the final code of the
# nineteenth session (a81a8d7's binaries) with the Python module staged the new way (shared
# Boost.Graph and what it needs in python/lib); then lockfree-tree+twig beside the rungs around it
# at depth 7 and both block sizes, to see whether its slowdown belongs to that rung's queues.
O=${OUT:-/tmp}/gpucheck; mkdir -p "$O"
S=$SECONDS
tar xJf build/gpu-stage.tar.xz -C build
GPU_CHECK_BUDGET_S=490 tools/gpu-check build/gpu-stage > "$O/gpucheck.txt" 2>&1
echo "gpu-check exit $? ($((SECONDS - S)) s since the call began)" >> "$O/gpucheck.txt"
C=build/gpu-stage/tools/canopy
for t in 256 128; do
  timeout 40 $C --log-level warn bench --depths 7 --threads $t --reps 5 --warmup 1 \
    --modes all-threads+twig,lockfree-tree+twig,shared-queues+twig,lockfree+twig,continuation+twig > "$O/lft_t$t.txt" 2>&1
done
tail -45 "$O/gpucheck.txt"
for f in "$O"/lft_t*.txt; do echo "== $(basename $f)"; grep -E "^depth|^  [a-z+-]+ +gpu" $f | cut -c1-100; done
cd "${OUT:-/tmp}" && tar cJf gpucheck.tar.xz gpucheck && rm -rf gpucheck
