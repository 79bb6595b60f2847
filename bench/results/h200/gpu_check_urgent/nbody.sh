#!/usr/bin/env bash
# The N-body step with --solver fmm on the stage of gpu-check's run.sh (urgent tasks compiled in,
# none marked: the evaluator's default; the queues' fetch_sub pops), Plummer 1M and 16M, against
# the walk's step at 1M, every check on.
set -u
[ -d build/gpu-stage ] || tar xJf build/gpu-stage.tar.xz -C build
N=build/gpu-stage/examples/nbody/nbody
nvidia-smi -L | head -1
run() { local name=$1; shift
  timeout 150 "$N" --backend gpu "$@" > /tmp/nbody_$name.txt 2>&1; local rc=$?
  { echo "== nbody $name rc=$rc: $*"; cat /tmp/nbody_$name.txt; } >> "$OUT/nbody.txt"
  echo "== nbody $name rc=$rc: $*"; grep -E '^(setup|fmm|forces|step|wall|check|result) ' /tmp/nbody_$name.txt | cut -c1-180; }
run fmm_1M --n 1M --steps 10 --check --check-sample 1000 --solver fmm
run fmm_16M --n 16M --steps 3 --check --check-sample 300 --solver fmm
