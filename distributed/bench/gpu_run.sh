#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU checks of canopy::distributed on one host with 4 GPUs, from the repository root, with
# the two binaries at their build paths (BUILD, default build/gpu):
#   distributed/bench/gpu_run.sh [BUILD] > gpu_run.txt 2>&1
# 1. distributed_octree_gpu_test under mpirun -n 2 and -n 4 (each under `timeout 180`: a hang
#    shows as rc 124); 2. canopy-dist-bench, 16M Plummer points a rank, on 1, 2 and 4 ranks with
#    --validate --per-rank (the pass in parts, each rank's tree) and --probe on 4; 3. on 1 and 4
#    ranks the pass's other choices: --mode warp-rounds, --tasks node.
# NCCL from the Python environment's nvidia-nccl wheel; NVLink multicast off.
set -u
build=${1:-build/gpu}
test_bin=$build/tests/gpu/distributed/distributed_octree_gpu_test
bench_bin=$build/distributed/canopy-dist-bench
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))')
export LD_LIBRARY_PATH=$nccl_lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
mpi=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
nvidia-smi -L
for n in 2 4; do
  echo "=== distributed_octree_gpu_test, $n ranks"
  timeout 180 "${mpi[@]}" -n $n "$test_bin"
  echo "rc=$?"
done
for n in 1 2 4; do
  extra=()
  [ $n = 4 ] && extra=(--probe)
  echo "=== canopy-dist-bench, $n ranks x 16M, twig tasks, mode continuation"
  timeout 300 "${mpi[@]}" -n $n "$bench_bin" --exchange nccl --points 16000000 --runs 7 --validate --per-rank "${extra[@]}"
  echo "rc=$?"
done
for n in 1 4; do
  for choice in "--mode warp-rounds" "--tasks node"; do
    echo "=== canopy-dist-bench, $n ranks x 16M, $choice"
    # shellcheck disable=SC2086
    timeout 300 "${mpi[@]}" -n $n "$bench_bin" --exchange nccl --points 16000000 --runs 7 --per-rank $choice
    echo "rc=$?"
  done
done
