#!/usr/bin/env bash
# 4 GPUs: the tool across the GPUs, the distributed pass bench, and the N-body step's scaling with
# one binary (the one-GPU runs in the same call).
set -u
[ -d build/gpu-stage ] || tar xJf build/gpu-stage.tar.xz -C build
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))')
export LD_LIBRARY_PATH=$nccl_lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
mpi=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
st=build/gpu-stage
t0=$SECONDS
out=$OUT/tool; mkdir -p $out
nvidia-smi -L
echo "=== the tool on 4 GPUs"
timeout 100 "${mpi[@]}" -n 4 $st/tools/canopy validate gen:plummer:64000000 --backend gpu --reps 5 > $out/validate_4x16M.txt 2>&1; echo "rc=$? ($((SECONDS-t0)) s)"; tail -12 $out/validate_4x16M.txt | cut -c1-200
for n in 1 4; do
  timeout 80 "${mpi[@]}" -n $n $st/tools/canopy bench --dist plummer -n $((n*16000000)) --modes continuation+twig,warp-rounds+twig \
    --reps 10 --warmup 2 --backend gpu --json $out/bench_${n}x16M.json > $out/bench_${n}x16M.txt 2>&1; echo "rc=$? ($((SECONDS-t0)) s)"; tail -4 $out/bench_${n}x16M.txt
done
nb=$st/examples/nbody/nbody
out=$OUT/nbody_dist; mkdir -p $out
run() {  # name ranks limit args...
  local name=$1 n=$2 limit=$3; shift 3
  echo "=== $name: mpirun -n $n nbody $*"
  timeout $limit "${mpi[@]}" -n $n $nb "$@" > $out/$name.txt 2>&1
  echo "rc=$? ($((SECONDS - t0)) s)"
  grep -E '^(backend|essential|decompose|build|walk|step   |check|result|memory)' $out/$name.txt | cut -c1-200
}
run weak_plummer_1x16M 1 70 --n 16000000 --steps 6 --backend gpu --check --check-sample 300 --log-level debug
run weak_plummer_4x16M 4 70 --n 64000000 --steps 6 --backend gpu --check --check-sample 300 --log-level debug
run weak_uniform_1x16M 1 60 --n 16000000 --dist uniform --steps 4 --backend gpu --check --check-sample 300
run weak_uniform_4x16M 4 60 --n 64000000 --dist uniform --steps 4 --backend gpu --check --check-sample 300
run strong_plummer_64M_1 1 90 --n 64000000 --steps 3 --backend gpu --check --check-sample 100
run strong_plummer_64M_2 2 80 --n 64000000 --steps 3 --backend gpu --check --check-sample 100
left=$((585 - (SECONDS - t0)))
[ $left -gt 60 ] && run billion_plummer_4 4 $left --n 1000000000 --steps 2 --backend gpu --check --check-sample 100 --log-level debug
echo "total $((SECONDS - t0)) s"
