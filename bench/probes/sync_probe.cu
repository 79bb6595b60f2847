// Tuning probe (not part of the suite): what one launch and one wait cost on this machine, by
// the ways a host can launch and wait. An empty kernel (528 x 256) and a one-task scheduler run,
// each timed on the host (steady_clock, launch to return of the wait) and with CUDA events, 500
// samples after warm-up; `sync_probe [auto|spin|yield|blocking]` sets the context's wait flag.
// Build like fixed_probe.cu.
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#include "canopy/gpu_scheduler.cuh"
#include "probe_timing.cuh"

__global__ void empty_kernel() {}

// Every block's thread 0 counts itself out; the last one writes `done` to host memory (system
// scope), which the host polls instead of waiting for the stream.
__global__ void flag_kernel(unsigned* blocks_done, volatile unsigned* done, unsigned epoch) {
  if (threadIdx.x != 0) return;
  __threadfence();
  if (atomicAdd(blocks_done, 1u) == gridDim.x - 1) {
    *blocks_done = 0;
    __threadfence_system();
    *done = epoch;
  }
}

struct big_args {
  unsigned long long w[32];
};
__global__ void big_kernel(big_args a) {
  if (a.w[1] == 12345 && threadIdx.x == 0) printf("never\n");
}

struct noop_ops {
  __device__ void operator()(canopy::task_id) const {}
};

template <class F>
double host_median_us(F&& f, int reps = 500) {
  for (int i = 0; i < 20; ++i) f();
  std::vector<double> v;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    const auto b = std::chrono::steady_clock::now();
    v.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  const char* how = argc > 1 ? argv[1] : "auto";
  unsigned flag = cudaDeviceScheduleAuto;
  if (!std::strcmp(how, "spin")) flag = cudaDeviceScheduleSpin;
  if (!std::strcmp(how, "yield")) flag = cudaDeviceScheduleYield;
  if (!std::strcmp(how, "blocking")) flag = cudaDeviceScheduleBlockingSync;
  cudaSetDeviceFlags(flag | cudaDeviceMapHost);
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  const dim3 grid(528), block(256);
  auto plain = [&] { empty_kernel<<<grid, block, 0, st>>>(); cudaStreamSynchronize(st); };
  auto coop = [&] {
    void* args[] = {nullptr};
    cudaLaunchCooperativeKernel((void*)empty_kernel, grid, block, args, 4096, st);
    cudaStreamSynchronize(st);
  };
  cudaGraph_t g; cudaGraphExec_t ge;
  cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
  empty_kernel<<<grid, block, 0, st>>>();
  cudaStreamEndCapture(st, &g);
  cudaGraphInstantiate(&ge, g, 0);
  auto graph = [&] { cudaGraphLaunch(ge, st); cudaStreamSynchronize(st); };
  // The same kernel as a cooperative kernel node with 256 bytes of parameters (the scheduler's
  // Ops and scheduler_ref are about that), launched as is or after updating its parameters.
  cudaGraph_t cg; cudaGraphExec_t cge; cudaGraphNode_t node;
  cudaGraphCreate(&cg, 0);
  big_args args_value{};
  void* kargs[] = {&args_value};
  cudaKernelNodeParams kp{};
  kp.func = (void*)big_kernel; kp.gridDim = grid; kp.blockDim = block; kp.sharedMemBytes = 4096; kp.kernelParams = kargs;
  if (cudaGraphAddKernelNode(&node, cg, nullptr, 0, &kp) != cudaSuccess) std::printf("add node failed\n");
  cudaLaunchAttributeValue coop_value{};
  coop_value.cooperative = 1;
  if (cudaGraphKernelNodeSetAttribute(node, cudaLaunchAttributeCooperative, &coop_value) != cudaSuccess)
    std::printf("cooperative attribute failed\n");
  if (cudaGraphInstantiate(&cge, cg, 0) != cudaSuccess) std::printf("instantiate failed\n");
  auto coop_graph = [&] { cudaGraphLaunch(cge, st); cudaStreamSynchronize(st); };
  auto coop_graph_update = [&] {
    args_value.w[0] ^= 1;
    cudaGraphExecKernelNodeSetParams(cge, node, &kp);
    cudaGraphLaunch(cge, st);
    cudaStreamSynchronize(st);
  };
  auto coop_big = [&] {
    cudaLaunchCooperativeKernel((void*)big_kernel, grid, block, kargs, 4096, st);
    cudaStreamSynchronize(st);
  };
  unsigned* blocks_done; cudaMalloc(&blocks_done, 4); cudaMemset(blocks_done, 0, 4);
  unsigned* done_h; cudaHostAlloc(&done_h, 4, cudaHostAllocMapped); *done_h = 0;
  unsigned* done_d; cudaHostGetDevicePointer(&done_d, done_h, 0);
  unsigned epoch = 0;
  auto polled = [&] {
    ++epoch;
    flag_kernel<<<grid, block, 0, st>>>(blocks_done, done_d, epoch);
    while (*(volatile unsigned*)done_h != epoch) {}
  };
  auto polled_then_sync = [&] { polled(); cudaStreamSynchronize(st); };
  std::vector<canopy::task_id> parent{canopy::no_task};
  canopy::scheduler_options o; o.threads_per_block = 256;
  canopy::gpu_scheduler s(canopy::task_graph::from_parents(parent), o);
  auto one_task = [&] { if (!s.run(noop_ops{}, st).ok()) std::printf("run failed\n"); };
  std::printf("wait flag %s\n", how);
  auto row = [&](const char* what, auto&& f) {
    const double h = host_median_us(f);
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    std::vector<double> v;
    for (int i = 0; i < 500; ++i) {
      cudaEventRecord(a, st); f(); cudaEventRecord(b, st); cudaEventSynchronize(b);
      float ms; cudaEventElapsedTime(&ms, a, b); v.push_back(ms * 1e3);
    }
    std::sort(v.begin(), v.end());
    std::printf("%-44s host %6.2f us   events %6.2f us\n", what, h, v[v.size() / 2]);
  };
  row("empty kernel, launch + stream sync", plain);
  row("empty kernel, cooperative + stream sync", coop);
  row("empty kernel, graph launch + stream sync", graph);
  row("256-byte kernel, cooperative + stream sync", coop_big);
  row("256-byte kernel, cooperative graph + sync", coop_graph);
  row("256-byte kernel, coop graph, params updated", coop_graph_update);
  row("flag kernel, launch + host polls the flag", polled);
  row("flag kernel, polled, then stream sync", polled_then_sync);
  // The scheduler on a stream of the caller's (graph launch on, then off), alone and followed by
  // one more kernel on the same stream; then the same on the legacy default stream.
  auto one_task_then_kernel = [&] { one_task(); empty_kernel<<<grid, block, 0, st>>>(); cudaStreamSynchronize(st); };
  auto one_task_legacy = [&] { if (!s.run(noop_ops{}).ok()) std::printf("run failed\n"); };
  auto one_task_legacy_then_kernel = [&] { one_task_legacy(); empty_kernel<<<grid, block>>>(); cudaStreamSynchronize(nullptr); };
  for (bool graphs : {true, false}) {
    s.set_graph_launch(graphs);
    std::printf("graph launch %s:\n", graphs ? "on" : "off");
    row("scheduler run of one no-op task", one_task);
    row("  the same, then an empty kernel", one_task_then_kernel);
    row("  on the legacy stream", one_task_legacy);
    row("  on the legacy stream, then a kernel", one_task_legacy_then_kernel);
  }
  std::printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
}
