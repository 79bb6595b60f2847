#!/usr/bin/env bash
# Packs the binaries payload_ab.sh runs into build/dstage/payload.tar.xz (run here, after building:
#   old: ninja -C build/h-payload-base/src/build/gpu canopy gpu_stress_fingerprint_test
#   new: ninja -C build/h-payload-new/src/build/gpu canopy gpu_stress_fingerprint_test \
#          trees_payload_policy_gpu_test trees_upward_runner_gpu_test trees_bucket_gpu_test)
set -euo pipefail
cd "$(dirname "$0")/../.."
S=build/dstage/payload
rm -rf "$S" && mkdir -p "$S/old" "$S/new"
OLD=build/h-payload-base/src/build/gpu NEW=build/h-payload-new/src/build/gpu
cp "$OLD/tools/canopy" "$OLD/tests/gpu/stress/gpu_stress_fingerprint_test" "$S/old/"
cp "$NEW/tools/canopy" "$NEW/tests/gpu/stress/gpu_stress_fingerprint_test" "$NEW/tests/gpu/trees/trees_payload_policy_gpu_test" \
   "$NEW/tests/gpu/trees/trees_upward_runner_gpu_test" "$NEW/tests/gpu/trees/trees_bucket_gpu_test" "$S/new/"
strip --strip-unneeded "$S"/old/* "$S"/new/*
tar -cf - -C build/dstage payload | xz -T2 -9 > build/dstage/payload.tar.xz
rm -rf "$S"
du -sh build/dstage/payload.tar.xz
