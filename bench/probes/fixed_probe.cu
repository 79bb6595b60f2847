// Tuning probe (not part of the suite): the fixed cost of a scheduler run, split in three by
// globaltimer stamps: a one-thread stamp kernel enqueued just before run() (A), the tasks' own
// stamps (first start, last end), and a stamp kernel enqueued after run() returned (B). A -> first
// task is launch and start-up, last task -> B is the end of the run, the host's wait and one more
// launch (measured alone as stamp -> stamp). Medians over 200 runs. Build like timeline_probe.cu.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include "canopy/gpu_scheduler.cuh"
#include "probe_timing.cuh"

__global__ void stamp(unsigned long long* at) { *at = canopy::detail::global_timer_ns(); }
__global__ void empty_kernel() {}

struct stamp_ops {
  unsigned long long* first;  // [0]: min start, [1]: max end
  __device__ void operator()(canopy::task_id) const {
    atomicMin(first, canopy::detail::global_timer_ns());
    __threadfence();
    atomicMax(first + 1, canopy::detail::global_timer_ns());
  }
};

double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main() {
  unsigned long long* d = nullptr;
  cudaMalloc(&d, 4 * sizeof(unsigned long long));
  for (int threads : {128, 256})
    for (int grid : {1, 66, 132, 264, 528, 1056}) {
      if (grid * threads > 132 * 2048) continue;
      const double plain = median_us([&] { empty_kernel<<<grid, threads>>>(); cudaStreamSynchronize(nullptr); }, 200);
      const double coop = median_us([&] {
        void* args[] = {nullptr};
        cudaLaunchCooperativeKernel((void*)empty_kernel, dim3(grid), dim3(threads), args, 4096, nullptr);
        cudaStreamSynchronize(nullptr); }, 200);
      std::printf("empty kernel %4dx%-3d launch+sync %6.1f us, cooperative %6.1f us\n", grid, threads, plain, coop);
    }
  {
    std::vector<double> ab;
    for (int i = 0; i < 200; ++i) {
      stamp<<<1, 1>>>(d + 2); cudaStreamSynchronize(nullptr); stamp<<<1, 1>>>(d + 3); cudaStreamSynchronize(nullptr);
      unsigned long long h[4]; cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
      ab.push_back((h[3] - h[2]) * 1e-3);
    }
    std::printf("stamp -> sync -> stamp             %6.1f us (the host's wait and one launch)\n", med(ab));
  }
  for (int tasks : {1, 8, 4681}) {
    std::vector<canopy::task_id> parent(tasks, 0);
    parent[0] = canopy::no_task;
    for (int i = 1; i < tasks; ++i) parent[i] = (i - 1) / 8;
    const auto graph = canopy::task_graph::from_parents(parent);
    for (int blocks : {0, 132, 1}) {
      canopy::scheduler_options o; o.threads_per_block = 256; o.blocks = blocks;
      canopy::gpu_scheduler s(graph, o);
      std::vector<double> start, span, end, ev;
      for (int i = 0; i < 203; ++i) {
        const unsigned long long init[2] = {~0ull, 0};
        cudaMemcpy(d, init, sizeof init, cudaMemcpyHostToDevice);
        cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
        stamp<<<1, 1>>>(d + 2);
        cudaEventRecord(a);
        const auto r = s.run(stamp_ops{d});
        cudaEventRecord(b);
        stamp<<<1, 1>>>(d + 3);
        cudaDeviceSynchronize();
        float ms = 0; cudaEventElapsedTime(&ms, a, b);
        cudaEventDestroy(a); cudaEventDestroy(b);
        if (!r.ok()) { std::printf("FAILED %s\n", r.message.c_str()); return 1; }
        unsigned long long h[4]; cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
        if (i < 3) continue;
        start.push_back((h[0] - h[2]) * 1e-3); span.push_back((h[1] - h[0]) * 1e-3); end.push_back((h[3] - h[1]) * 1e-3);
        ev.push_back(ms * 1e3);
      }
      std::printf("noop tree %5d tasks, %4d x 256: event %6.1f us | stamp A -> first task %5.1f, tasks %5.1f, last task -> stamp B %5.1f\n",
                  tasks, s.last_grid(), med(ev), med(start), med(span), med(end));
    }
  }
}
