// Diagnostic (not part of the suite): the deep random DAG that stalls in continuation at full
// occupancy, with a per-task execution count, to tell a lost task from one run twice.
#include <cstdio>
#include <vector>
#include "canopy/gpu_scheduler.cuh"
#include "random_dag.hpp"

struct counting_ops {
  int* runs;
  __device__ void operator()(canopy::task_id t) const { atomicAdd(runs + t, 1); }
};

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 100003;
  const auto d = canopy::test::make_random_dag(n, canopy::test::dag_shape::deep, 1);
  const auto g = canopy::task_graph::from_edges(d.task_count, d.edges);
  int* runs = nullptr;
  cudaMalloc(&runs, sizeof(int) * n);
  for (canopy::mode m : {canopy::mode::lockfree, canopy::mode::continuation}) {
    for (int blocks : {0, 132, 14}) {
      canopy::scheduler_options o;
      o.mode = m;
      o.blocks = blocks;
      o.deadline = std::chrono::milliseconds(5000);
      canopy::gpu_scheduler s(g, o);
      for (int rep = 0; rep < 3; ++rep) {
        cudaMemset(runs, 0, sizeof(int) * n);
        cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
        cudaEventRecord(a);
        const auto r = s.run(counting_ops{runs});
        cudaEventRecord(b); cudaEventSynchronize(b);
        float ms = 0; cudaEventElapsedTime(&ms, a, b);
        std::vector<int> h(n);
        cudaMemcpy(h.data(), runs, sizeof(int) * n, cudaMemcpyDeviceToHost);
        long zero = 0, twice = 0, total = 0; int first_zero = -1, first_twice = -1;
        for (int t = 0; t < n; ++t) {
          total += h[t];
          if (h[t] == 0) { ++zero; if (first_zero < 0) first_zero = t; }
          if (h[t] > 1) { ++twice; if (first_twice < 0) first_twice = t; }
        }
        std::printf("%-13s blocks %4d rep %d: %-8s %9.1f ms  ran %ld of %d, never %ld (first %d), more than once %ld (first %d)  %s\n",
                    canopy::to_string(m).data(), s.last_grid(), rep, canopy::to_string(r.code).data(), ms, total, n, zero,
                    first_zero, twice, first_twice, r.ok() ? "" : r.message.c_str());
      }
    }
  }
}
