// Diagnostic (not part of the suite): the idle blocks' sleep cap (scheduler_options::
// idle_sleep_max) against a deep DAG at full occupancy (where polling starved the working block)
// and against small trees (where a long sleep delays the end of the run). Every tree result is
// validated before it is timed; DAG runs count every task's executions. Build after the gpu preset:
//   nvcc -O3 -std=c++20 --expt-relaxed-constexpr -arch=sm_90 -Xcompiler -static-libstdc++ \
//     -Xcompiler -static-libgcc -Iruntime/include -Itrees/include -Itests/common tools/dev/poll_probe.cu \
//     build/gpu/trees/libcanopy_trees.a build/gpu/runtime/libcanopy_runtime.a -o build/gpu/poll_probe
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include "canopy/gpu_scheduler.cuh"
#include "canopy/trees/device_octree.cuh"
#include "canopy/trees/reference.hpp"
#include "canopy/trees/upward_pass.hpp"
#include "random_dag.hpp"
#include "probe_timing.cuh"

namespace ct = canopy::trees;

struct counting_ops {
  int* runs;
  __device__ void operator()(canopy::task_id t) const { atomicAdd(runs + t, 1); }
};
struct noop_ops { __device__ void operator()(canopy::task_id) const {} };

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 100003;
  const auto d = canopy::test::make_random_dag(n, canopy::test::dag_shape::deep, 1);
  const auto g = canopy::task_graph::from_edges(d.task_count, d.edges);
  int* runs = nullptr;
  cudaMalloc(&runs, sizeof(int) * n);
  const ct::octree t5 = ct::build_complete_octree(5, 8, 1), t6 = ct::build_complete_octree(6, 8, 1);
  const auto r5 = ct::reference_upward_pass(t5), r6 = ct::reference_upward_pass(t6);
  ct::device_octree d5(t5), d6(t6);
  ct::device_payloads<float> o5(t5.node_count()), o6(t6.node_count());
  std::vector<canopy::task_id> parent(37449, 0); parent[0] = canopy::no_task;
  for (int i = 1; i < 37449; ++i) parent[i] = (i - 1) / 8;
  const auto noop_tree = canopy::task_graph::from_parents(parent);

  std::vector<long> caps;
  for (int i = 2; i < argc; ++i) caps.push_back(std::atol(argv[i]));
  if (caps.empty()) caps = {2048, 0, 8192, 32768};
  for (long cap : caps) {
    const char* capname = cap == 0 ? "auto" : "";
    for (canopy::mode m : {canopy::mode::continuation, canopy::mode::lockfree}) {
      for (int blocks : {0, 132}) {
        if (blocks == 132 && m == canopy::mode::lockfree) continue;
        canopy::scheduler_options o; o.mode = m; o.blocks = blocks; o.idle_sleep_max = std::chrono::nanoseconds(cap);
        o.deadline = std::chrono::milliseconds(4000);
        canopy::gpu_scheduler s(g, o);
        cudaMemset(runs, 0, sizeof(int) * n);
        cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
        cudaEventRecord(a);
        const auto r = s.run(counting_ops{runs});
        cudaEventRecord(b); cudaEventSynchronize(b);
        float ms = 0; cudaEventElapsedTime(&ms, a, b);
        std::vector<int> h(n);
        cudaMemcpy(h.data(), runs, sizeof(int) * n, cudaMemcpyDeviceToHost);
        long total = 0, twice = 0;
        for (int x : h) { total += x; twice += x > 1; }
        std::printf("cap %5ld%-4s deep dag %6d %-13s blocks %4d: %-8s %9.1f ms  ran %ld, twice %ld, %.2f us/task\n", cap, capname, n,
                    canopy::to_string(m).data(), s.last_grid(), canopy::to_string(r.code).data(), ms, total, twice,
                    1000.0 * ms / std::max(1L, total));
      }
    }
    for (canopy::mode m : {canopy::mode::continuation, canopy::mode::lockfree}) {
      for (int depth : {5, 6}) {
        const ct::octree& t = depth == 5 ? t5 : t6;
        const auto& ref = depth == 5 ? r5 : r6;
        ct::device_octree& dt = depth == 5 ? d5 : d6;
        ct::device_payloads<float>& out = depth == 5 ? o5 : o6;
        canopy::scheduler_options o; o.mode = m; o.idle_sleep_max = std::chrono::nanoseconds(cap);
        canopy::gpu_scheduler s(ct::make_upward_graph(t), o);
        const auto tr = dt.ref();
        ct::with_upward_lanes(ct::upward_lanes(t), [&](auto L) {
          const ct::upward_ops<float, L()> ops{tr.points, tr.first_child, tr.child_count, tr.point_begin, tr.point_count, out.data()};
          cudaMemset(out.data(), 0xff, sizeof(ct::multipole<float>) * t.node_count());
          const auto r = s.run(ops);
          const auto c = ct::compare_payloads<float>(t, out.download(), ref);
          const double us = r.ok() && c.within_tolerance ? median_us([&] { s.run(ops); }, 50) : -1;
          std::printf("cap %5ld%-4s depth %d octree   %-13s blocks %4d: %s %9.1f us\n", cap, capname, depth, canopy::to_string(m).data(),
                      s.last_grid(), r.ok() && c.within_tolerance ? "ok " : "BAD", us);
          return 0;
        });
      }
      canopy::scheduler_options o; o.mode = m; o.idle_sleep_max = std::chrono::nanoseconds(cap);
      canopy::gpu_scheduler s(noop_tree, o);
      std::printf("cap %5ld%-4s noop tree 37449 %-13s blocks full: %9.1f us\n", cap, capname, canopy::to_string(m).data(),
                  median_us([&] { s.run(noop_ops{}); }, 50));
    }
  }
}
