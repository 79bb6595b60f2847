#!/usr/bin/env bash
# A/B of the upward pass before and after the payload-policy change (issue 40, item 1), on ONE GPU.
#   old = 27e73e1 (build/h-payload-base/src, built with `cmake --preset gpu` in that copy)
#   new = 27e73e1 + the payload-policy commits' files only (build/h-payload-new/src, same preset),
#         so the runtime edits other people have in the working tree are in neither.
# Staged by build/dstage/payload_stage.sh into build/dstage/payload.tar.xz (carry build/dstage).
# Run from the repository root on the device:  bash build/dstage/payload_ab.sh [check|bench|all]
# (check: the GPU tests and bit identity, ~3-4 min; bench: the alternating timings, ~6-8 min;
# two device calls keep each under the 10-minute limit). Writes everything under $OUT.
set -u
PHASE=${1:-all}
OUT=${OUT:-/tmp/payload_ab}
mkdir -p "$OUT"
S=build/dstage/payload
rm -rf "$S" && tar -xJf build/dstage/payload.tar.xz -C build/dstage || { echo "no build/dstage/payload.tar.xz"; exit 1; }
OLD=$S/old NEW=$S/new
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"

fail=0
if [ "$PHASE" != bench ]; then
# 1. Correctness of the new build (label gpu tests that touch the passes).
for t in trees_payload_policy_gpu_test trees_upward_runner_gpu_test trees_bucket_gpu_test; do
  timeout 300 "$NEW/$t" > "$OUT/$t.txt" 2>&1; rc=$?
  echo "$t rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/$t.txt" | tr '\n' ' ')"
  [ $rc -eq 0 ] || fail=1
done
# `canopy validate` (new tool): task kinds x a few modes against the double reference at every node
# (the benchmark below also validates every result before it times it).
for kind in node twig bucket; do
  for mode in all-threads lockfree-tree continuation warp-rounds; do
    timeout 120 "$NEW/canopy" validate gen:plummer:1000000 --backend gpu --tasks $kind --mode $mode >> "$OUT/validate_new.txt" 2>&1
    rc=$?; [ $rc -eq 0 ] || { echo "validate $kind $mode rc=$rc"; fail=1; }
  done
done
echo "validate (new): $(grep -c . "$OUT/validate_new.txt") lines, fail=$fail"

# 2. Bit identity on the GPU: the payload fingerprints (every payload's bits, node and twig tasks,
#    every mode and block size) of the two builds must be equal line for line.
for b in old new; do
  timeout 300 "$S/$b/gpu_stress_fingerprint_test" --gtest_filter='*PayloadBits*' > "$OUT/fingerprint_$b.txt" 2>&1
  echo "fingerprint $b rc=$?"
  grep '^payloads ' "$OUT/fingerprint_$b.txt" > "$OUT/fingerprint_$b.lines"
done
if [ -s "$OUT/fingerprint_old.lines" ] && cmp -s "$OUT/fingerprint_old.lines" "$OUT/fingerprint_new.lines"; then
  echo "payload fingerprints: IDENTICAL ($(wc -l < "$OUT/fingerprint_new.lines") lines)"
else
  echo "payload fingerprints: DIFFER or missing"; diff "$OUT/fingerprint_old.lines" "$OUT/fingerprint_new.lines" | head; fail=1
fi
# The root payload of a large adaptive tree, each kind, old and new (JSON, floats printed exactly).
for kind in node twig bucket; do
  for b in old new; do
    "$S/$b/canopy" accumulate gen:plummer:4000000 --backend gpu --tasks $kind --json 2>/dev/null |
      python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d["root"], sort_keys=True))' > "$OUT/root_${kind}_$b.json"
  done
  cmp -s "$OUT/root_${kind}_old.json" "$OUT/root_${kind}_new.json" && echo "root $kind: identical" || { echo "root $kind: DIFFERS"; fail=1; }
done

fi
if [ "$PHASE" != check ]; then
# 3. Speed, alternating the builds (old new old new), stream time T1 (median of 20 after warm-up).
MODES=continuation+twig,warp-rounds+twig,lockfree-tree+twig,continuation,warp-rounds,continuation+bucket,level-graph
for round in 1 2; do
  for b in old new; do
    timeout 240 "$S/$b/canopy" bench --depths 4-8 --modes $MODES --json "$OUT/depth_${b}_$round.json" > "$OUT/depth_${b}_$round.txt" 2>&1
    echo "bench depths $b round $round rc=$?"
    timeout 240 "$S/$b/canopy" bench --dist plummer -n 16M --modes continuation+twig,warp-rounds+twig,continuation,level-graph \
      --json "$OUT/p16m_${b}_$round.json" > "$OUT/p16m_${b}_$round.txt" 2>&1
    echo "bench plummer 16M $b round $round rc=$?"
  done
done
# A table: per tree and mode, the median us of each run, and new/old of the rounds' medians.
python3 - "$OUT" <<'EOF'
import json, glob, os, sys, statistics
out = sys.argv[1]
rows = {}
def walk(x, path=()):
    # The bench JSON's shape is the tool's; pick every object that has a median and a mode/name.
    if isinstance(x, dict):
        med = next((x[k] for k in ("median_us", "median") if k in x and isinstance(x[k], (int, float))), None)
        name = x.get("mode") or x.get("name") or x.get("variant")
        tree = x.get("depth", x.get("tree", x.get("input", "")))
        if med is not None and name:
            yield (str(tree), str(name)), med
        for k, v in x.items():
            yield from walk(v, path + (k,))
    elif isinstance(x, list):
        for v in x:
            yield from walk(v, path)
for f in sorted(glob.glob(os.path.join(out, "*_*_[12].json"))):
    base = os.path.basename(f)[:-5]
    suite, build, rnd = base.split("_")
    for (tree, mode), med in walk(json.load(open(f))):
        rows.setdefault((suite, tree, mode), {}).setdefault(build, []).append(med)
print(f"{'suite':5} {'tree':>8} {'mode':28} {'old us':>20} {'new us':>20} {'new/old':>8}")
for (suite, tree, mode), d in sorted(rows.items()):
    o, n = d.get("old", []), d.get("new", [])
    ratio = statistics.median(n) / statistics.median(o) if o and n else float("nan")
    print(f"{suite:5} {tree:>8} {mode:28} {' '.join(f'{v:.1f}' for v in o):>20} {' '.join(f'{v:.1f}' for v in n):>20} {ratio:8.3f}")
EOF
fi
echo "correctness ($PHASE): $([ $fail -eq 0 ] && echo PASS || echo FAIL)"
