#!/usr/bin/env bash
set -u
tar xJf build/gpu-stage.tar.xz -C build
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))')
export LD_LIBRARY_PATH=$nccl_lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
mpi=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
nb=build/gpu-stage/examples/nbody/nbody
out=$OUT/nbody_dist
mkdir -p $out $OUT/fmm
nvidia-smi -L
echo "=== fmm gpu test"
timeout 150 build/gpu-stage/tests/gpu/fmm/fmm_gpu_evaluate_gpu_test --gtest_brief=1 > $OUT/fmm/gpu_test.txt 2>&1; echo "rc=$?"; tail -15 $OUT/fmm/gpu_test.txt
for p in 6 8; do
  echo "=== fmm bench order $p"
  timeout 150 build/gpu-stage/trees/fmm/canopy_fmm_gpu_bench --n 65536,1048576 --order $p --theta 0.5 --reps 20 > $OUT/fmm/bench_p$p.txt 2>&1; echo "rc=$?"; tail -25 $OUT/fmm/bench_p$p.txt
done
run() {  # name ranks args...
  local name=$1 n=$2; shift 2
  echo "=== $name: mpirun -n $n nbody $*"
  timeout 240 "${mpi[@]}" -n $n $nb "$@" > $out/$name.txt 2>&1
  echo "rc=$?"
  grep -E '^(backend|essential|decompose|build|walk|step   |check|result)' $out/$name.txt | cut -c1-200
  grep -E '^ +[0-9]+ +0\.0' $out/$name.txt | cut -c1-170
}
run weak_plummer_1x16M 1 --n 16000000 --steps 6 --backend gpu --check --check-sample 300 --log-level debug
run weak_plummer_4x16M 4 --n 64000000 --steps 6 --backend gpu --check --check-sample 300 --log-level debug
run weak_uniform_1x16M 1 --n 16000000 --dist uniform --steps 4 --backend gpu --check --check-sample 300
run weak_uniform_4x16M 4 --n 64000000 --dist uniform --steps 4 --backend gpu --check --check-sample 300
run strong_plummer_64M_2 2 --n 64000000 --steps 3 --backend gpu --check --check-sample 100
run billion_plummer_4 4 --n 1000000000 --steps 2 --backend gpu --check --check-sample 100 --log-level debug
