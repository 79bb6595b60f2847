#!/usr/bin/env bash
# Runs the Python module's test suite (tests/python, copied to build/pygpu/pkg/tests) with its GPU
# tests, on the GPU machine, against the extension built in build/pygpu/build (CANOPY_GPU=ON, sm_90,
# static libstdc++/libgcc/cudart/Boost). Run from the repository root:  bash build/pygpu/run.sh
# Needs build/pygpu/pkg and build/pygpu/run.sh carried (ignored paths). Output also in
# $OUT/pytest_gpu.txt and $OUT/extra_gpu_checks.txt when $OUT is set.
# Exit status: pytest's (or 3 if the GPU tests would be skipped, 4 if pytest cannot run), or 1 if
# pytest passed but the extra checks failed.
set -u
ROOT=$(pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PKG=$HERE/pkg
PY=${PY:-/opt/torch/.venv/bin/python}
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"; LOG=$OUT/pytest_gpu.txt; XLOG=$OUT/extra_gpu_checks.txt
else
  LOG=$(mktemp); XLOG=$(mktemp)
fi
: > "$LOG"

export PYTHONPATH=$PKG
export PYTHONDONTWRITEBYTECODE=1
export MPLBACKEND=Agg
export CANOPY_SOURCE_DIR=$ROOT   # test_module's plot_levels example lives in examples/python/
if ! "$PY" -c 'import pytest' 2>/dev/null; then
  echo "note: no pytest in $PY: using the copy in $PKG/_pytest_fallback (pytest 9.2, pure Python)" | tee -a "$LOG"
  export PYTHONPATH=$PKG:$PKG/_pytest_fallback
fi

{
  echo "== $(date -u +%FT%TZ) $(hostname)  repo: $ROOT"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
  "$PY" - <<'PY'
import sys, platform
print("python", sys.version.split()[0], sys.executable, platform.platform())
import numpy; print("numpy", numpy.__version__)
try:
    import cupy
    print("cupy", cupy.__version__, "cuda runtime", cupy.cuda.runtime.runtimeGetVersion(),
          "driver", cupy.cuda.runtime.driverGetVersion(),
          "device", cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())
except Exception as e:
    print("cupy: NOT usable:", type(e).__name__, e)
import pytest; print("pytest", pytest.__version__, pytest.__file__)
import canopy; print("canopy", canopy.__version__, canopy.__file__); print("build_info", canopy.build_info())
PY
} 2>&1 | tee -a "$LOG"

# The conftest skips every `gpu` test unless canopy.gpu_available(); test_device_arrays also needs
# cupy. Refuse to run a suite that would silently skip them.
if ! "$PY" -c 'import canopy, cupy, sys; sys.exit(0 if canopy.gpu_available() and canopy.has_gpu_backend() else 1)' 2>>"$LOG"; then
  echo "ERROR: canopy.gpu_available() is False or cupy does not import: the GPU tests would be skipped" | tee -a "$LOG"
  exit 3
fi

cd "$PKG" || exit 4
"$PY" -m pytest -v -rs -p no:cacheprovider tests 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}
echo "== pytest exit status: $rc" | tee -a "$LOG"
if [ "$rc" -ne 0 ] && ! grep -q "passed\|failed" "$LOG"; then
  echo "ERROR: pytest did not run (exit $rc)" | tee -a "$LOG"
  exit 4
fi
echo "== gpu-marked tests:" | tee -a "$LOG"
"$PY" -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tail -n 3 | tee -a "$LOG"

"$PY" extra_gpu_checks.py 2>&1 | tee "$XLOG"
xrc=${PIPESTATUS[0]}
echo "== extra_gpu_checks exit status: $xrc" | tee -a "$XLOG"
[ "$rc" -ne 0 ] && exit "$rc"
exit "$xrc"
