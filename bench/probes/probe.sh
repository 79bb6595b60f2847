#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs tuning probes on the GPU machine (bench/probes/README.md): first a quick correctness check
# of the scheduler on this device (its GPU test binary, if built), then each probe given, with its
# arguments, its output echoed and kept in $OUT/probes/NAME.log (or BUILD_DIR/probe-logs).
#   bench/probes/probe.sh [BUILD_DIR] ['PROBE ARGS' ...]     # BUILD_DIR defaults to build/gpu
#   bench/probes/probe.sh build/gpu 'twig_probe 7 --ab' 'launch_probe spin'
# Without probes it runs a short default set (launch_probe; twig_probe 7 --ab: a few minutes on
# an H100). 'tool-sweep' runs the tool's validated sweep of depth 5 by mode, blocks and threads.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/gpu}
[ $# -gt 0 ] && shift
probes=("$@")
[ ${#probes[@]} -eq 0 ] && probes=("launch_probe" "twig_probe 7 --ab")
logs=${OUT:+$OUT/probes}
logs=${logs:-$build/probe-logs}
mkdir -p "$logs"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader || true
t=$build/tests/gpu/runtime/runtime_gpu_scheduler_test
if [ -x "$t" ]; then
  echo "== $t"
  "$t" --gtest_brief=1 2>&1 | tail -3
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "probe.sh: the scheduler's GPU tests fail here; timings would mean nothing" >&2; exit 1; }
fi
tool_sweep() {
  local c=$build/tools/canopy
  for m in continuation lockfree shared-queues lockfree-tree all-threads; do
    echo "== depth 5 $m"; "$c" validate gen:lattice:5:8 --backend gpu --mode "$m" --reps 50 --log-level warn 2>&1 | grep -E "compared|result"
  done
  for b in 132 264 528; do
    echo "== depth 5 continuation blocks $b"
    "$c" validate gen:lattice:5:8 --backend gpu --mode continuation --blocks "$b" --reps 50 --log-level warn 2>&1 | grep -E "compared|result"
  done
  for th in 128 512; do
    echo "== depth 5 continuation threads $th"
    "$c" validate gen:lattice:5:8 --backend gpu --mode continuation --threads "$th" --reps 50 --log-level warn 2>&1 | grep -E "compared|result"
  done
}
status=0
for p in "${probes[@]}"; do
  read -r -a cmd <<<"$p"
  name=${cmd[0]}
  echo "== $p"
  if [ "$name" = tool-sweep ]; then
    tool_sweep 2>&1 | tee "$logs/tool-sweep.log"
  elif [ -x "$build/bench/probes/$name" ]; then
    "$build/bench/probes/$name" "${cmd[@]:1}" 2>&1 | tee "$logs/$name.log"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  else
    echo "probe.sh: no $build/bench/probes/$name (cmake --build $build --target canopy_probes)" >&2
    status=1
  fi
done
exit $status
