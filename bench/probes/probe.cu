// Tuning probe (not part of the suite): fixed costs of a launch and of a scheduler run, and the
// upward pass with lane groups of 1..8, validated, warm medians with CUDA events; every sweep in
// bench/RESULTS.md came from it. Not built by CMake; after `cmake --build build/gpu` (gpu preset):
//   nvcc -O3 -std=c++20 --expt-relaxed-constexpr -arch=sm_90 -Xcompiler -static-libstdc++ \
//     -Xcompiler -static-libgcc -Iruntime/include -Itrees/include -Ibench tools/dev/probe.cu \
//     build/gpu/bench/baselines/libcanopy_bench_baselines.a build/gpu/trees/libcanopy_trees.a \
//     build/gpu/runtime/libcanopy_runtime.a -o build/gpu/probe     # then: build/gpu/probe 8
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include "canopy/gpu_scheduler.cuh"
#include "canopy/trees/device_octree.cuh"
#include "canopy/trees/reference.hpp"
#include "canopy/trees/upward_pass.hpp"
#include "baselines/baselines.cuh"
#include "canopy/trees/generators.hpp"
#include "probe_timing.cuh"

namespace ct = canopy::trees;
__global__ void empty_kernel() {}
struct noop_ops { __device__ void operator()(canopy::task_id) const {} };

template <int G, int B = (G >= 8 ? 1 : 2)>
void run_tree(const ct::octree& tree, const std::vector<ct::multipole<double>>& ref, ct::device_octree& d,
              ct::device_payloads<float>& out, canopy::mode m, int blocks, int threads, const char* name) {
  canopy::scheduler_options o; o.mode = m; o.blocks = blocks; o.threads_per_block = threads;
  canopy::gpu_scheduler s(ct::make_upward_graph(tree), o);
  const auto t = d.ref();
  ct::upward_ops<float, G, B> ops{t.points, t.first_child, t.child_count, t.point_begin, t.point_count, out.data()};
  cudaMemset(out.data(), 0xff, sizeof(ct::multipole<float>) * tree.node_count());
  auto r = s.run(ops);
  auto host = out.download();
  auto c = ct::compare_payloads<float>(tree, host, ref);
  double us = r.ok() && c.within_tolerance ? median_us([&] { s.run(ops); }, tree.node_count() > 1000000 ? 10 : 50) : -1;
  std::printf("%-20s G=%d B=%d %-13s blocks %4d x %4d  %s  %10.1f us\n", name, G, B, canopy::to_string(m).data(), s.last_grid(), threads,
              r.ok() ? (c.within_tolerance ? "ok  " : "BAD ") : "FAIL", us);
}

int main(int argc, char** argv) {
  int max_depth = argc > 1 ? std::atoi(argv[1]) : 8;
  std::printf("empty kernel 1x32 launch+sync      %8.1f us\n", median_us([] { empty_kernel<<<1, 32>>>(); }));
  std::printf("empty kernel 264x256 launch+sync   %8.1f us\n", median_us([] { empty_kernel<<<264, 256>>>(); }));
  std::printf("empty cooperative 264x256          %8.1f us\n", median_us([] {
    cudaLaunchCooperativeKernel((const void*)empty_kernel, dim3(264), dim3(256), nullptr, 0, nullptr); }));
  std::printf("empty cooperative 1056x256         %8.1f us\n", median_us([] {
    cudaLaunchCooperativeKernel((const void*)empty_kernel, dim3(1056), dim3(256), nullptr, 0, nullptr); }));
  cudaStreamSynchronize(nullptr);
  for (int n : {1, 8, 37449}) {
    std::vector<canopy::task_id> parent(n, 0); parent[0] = canopy::no_task;
    for (int i = 1; i < n; ++i) parent[i] = (i - 1) / 8;
    for (canopy::mode m : {canopy::mode::lockfree, canopy::mode::continuation}) for (int b : {1, 132, 0}) {
      canopy::scheduler_options o; o.mode = m; o.blocks = b;
      canopy::gpu_scheduler s(canopy::task_graph::from_parents(parent), o);
      double us = median_us([&] { s.run(noop_ops{}); });
      std::printf("noop tree n=%-6d %-13s blocks %4d  %8.1f us\n", n, canopy::to_string(m).data(), s.last_grid(), us);
    }
  }
  for (int which = 0; which < 3; ++which) {
    if (which == 1 && max_depth < 8) continue;
    auto tree = which == 0 ? ct::build_complete_octree(5, 8, 1)
              : which == 1 ? ct::build_complete_octree(8, 8, 1)
                           : ct::build_octree(ct::generate_plummer(16u << 20, 1), ct::build_options{32, 21});
    const char* name = which == 0 ? "depth 5" : which == 1 ? "depth 8" : "plummer 16M leaf32";
    auto ref = ct::reference_upward_pass(tree);
    ct::device_octree d(tree);
    ct::device_payloads<float> out(tree.node_count());
    {
      canopy::bench::baseline_runner runner(d, out);
      for (auto k : canopy::bench::all_baseline_kinds) {
        cudaMemset(out.data(), 0xff, sizeof(ct::multipole<float>) * tree.node_count());
        runner.run(k); cudaDeviceSynchronize();
        auto c = ct::compare_payloads<float>(tree, out.download(), ref);
        double us = median_us([&] { runner.run(k); }, 20);
        std::printf("%-28s %-30s %s %10.1f us\n", name, canopy::bench::to_string(k).data(), c.within_tolerance ? "ok " : "BAD", us);
      }
    }
    for (canopy::mode m : {canopy::mode::lockfree_tree, canopy::mode::lockfree, canopy::mode::continuation}) {
      run_tree<2, 1>(tree, ref, d, out, m, 0, 128, name);
      run_tree<2, 2>(tree, ref, d, out, m, 0, 128, name);
      run_tree<4, 2>(tree, ref, d, out, m, 0, 128, name);
    }
  }
}
