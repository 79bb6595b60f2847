// Tuning probe (not part of the suite): where the time of a small run goes. Wraps the octree ops
// so that every task records its start and end (globaltimer), then prints, per tree level, when
// its first task started and its last one ended, relative to the run's first task, beside the
// CUDA-event time of the whole call (launch + wait). Validated before timing. Build after the gpu
// preset:
//   nvcc -O3 -std=c++20 --expt-relaxed-constexpr -arch=sm_90 -Xcompiler -static-libstdc++ \
//     -Xcompiler -static-libgcc -Iruntime/include -Itrees/include -Ibench tools/dev/timeline_probe.cu \
//     build/gpu/trees/libcanopy_trees.a build/gpu/runtime/libcanopy_runtime.a -o build/probes/timeline_probe
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>
#include "canopy/gpu_scheduler.cuh"
#include "canopy/trees/device_octree.cuh"
#include "canopy/trees/generators.hpp"
#include "canopy/trees/reference.hpp"
#include "canopy/trees/twig_pass.hpp"
#include "canopy/trees/upward_pass.hpp"
#include "probe_timing.cuh"
#include "probe_trees.cuh"

namespace ct = canopy::trees;


template <class Inner>
struct timed_ops {
  static constexpr int group_size = Inner::group_size;
  static constexpr int tasks_per_group = canopy::detail::tasks_per_group_of<Inner, group_size>();
  Inner inner;
  unsigned long long* begin;
  unsigned long long* end;
  __host__ __device__ void operator()(canopy::task_id t) const { inner(t); }
  // Forward the prefetch hints when Inner has them, so that the timeline is of the real pass.
  __device__ void prefetch(canopy::task_id t, canopy::prefetch_stage s) const
    requires canopy::detail::has_prefetch<Inner>
  { inner.prefetch(t, s); }
  template <int G>
  __device__ void operator()(canopy::task_id t, const canopy::lane_group<G>& g) const {
    if (g.rank == 0) begin[t] = canopy::detail::global_timer_ns();
    inner(t, g);
    g.sync();
    if (g.rank == 0) end[t] = canopy::detail::global_timer_ns();
  }
};

// Per level: first start, last end (us after the first start of the run).
void print_timeline(const char* what, const std::vector<int>& task_level, int levels, const std::vector<unsigned long long>& b,
                    const std::vector<unsigned long long>& e, double event_us) {
  const unsigned long long t0 = *std::min_element(b.begin(), b.end());
  const unsigned long long t1 = *std::max_element(e.begin(), e.end());
  std::printf("%-34s event %6.1f us, tasks span %6.1f us |", what, event_us, (t1 - t0) * 1e-3);
  for (int l = levels - 1; l >= 0; --l) {
    unsigned long long lo = ~0ull, hi = 0;
    for (std::size_t t = 0; t < b.size(); ++t)
      if (task_level[t] == l) { lo = std::min(lo, b[t]); hi = std::max(hi, e[t]); }
    if (hi == 0) continue;
    std::printf(" L%d %.1f-%.1f", l, (lo - t0) * 1e-3, (hi - t0) * 1e-3);
  }
  std::printf("\n");
}

int main(int argc, char** argv) {
  const int depth = argc > 1 ? std::atoi(argv[1]) : 5;
  twig_setup setup(depth);
  const auto& [tree, ref, d, out, t, tg, tasks] = setup;
  const int n = std::max<int>(tree.node_count(), static_cast<int>(tg.tasks.size()));
  unsigned long long *db = nullptr, *de = nullptr;
  cudaMalloc(&db, sizeof(unsigned long long) * n);
  cudaMalloc(&de, sizeof(unsigned long long) * n);
  auto check = [&] { return setup.valid(); };

  auto run = [&](const std::string& name, const canopy::task_graph& graph, std::vector<int> task_level, auto inner,
                 canopy::mode m, int blocks, int threads, int idle_ns) {
    canopy::scheduler_options o;
    o.mode = m; o.blocks = blocks; o.threads_per_block = threads;
    o.idle_sleep_max = std::chrono::nanoseconds(idle_ns);
    canopy::gpu_scheduler s(graph, o);
    const timed_ops<decltype(inner)> ops{inner, db, de};
    cudaMemset(out.data(), 0xff, sizeof(ct::multipole<float>) * tree.node_count());
    const auto r = s.run(ops);
    if (!r.ok() || !check()) { std::printf("%s: FAILED %s\n", name.c_str(), r.message.c_str()); return; }
    const double plain = median_us([&] { s.run(inner); }, 50);   // without the stamps
    const double us = median_us([&] { s.run(ops); }, 50);
    const int k = graph.task_count();
    std::vector<unsigned long long> b(k), e(k);
    cudaMemcpy(b.data(), db, sizeof(unsigned long long) * k, cudaMemcpyDeviceToHost);
    cudaMemcpy(e.data(), de, sizeof(unsigned long long) * k, cudaMemcpyDeviceToHost);
    char what[160];
    std::snprintf(what, sizeof what, "%s %s %dx%d idle %d (plain %.1f)", name.c_str(), canopy::to_string(m).data(), s.last_grid(),
                  threads, idle_ns, plain);
    print_timeline(what, task_level, tree.depth + 1, b, e, us);
  };

  std::vector<int> node_level(tree.node_count()), twig_level(tg.tasks.size());
  for (int i = 0; i < tree.node_count(); ++i) node_level[i] = tree.level[i];
  for (std::size_t i = 0; i < tg.tasks.size(); ++i) twig_level[i] = tree.level[tg.tasks[i].node()];
  std::printf("depth %d: %d nodes, twig graph %d tasks\n", depth, tree.node_count(), tg.graph.task_count());
  {
    constexpr int L = 2;  // trees::upward_lanes of 8 points per leaf
    const ct::upward_ops<float, L> node_ops{t.points, t.first_child, t.child_count, t.point_begin, t.point_count, out.data()};
    const ct::twig_upward_ops<float, L> twig_ops{tasks, t.points, t.first_child, t.child_count, t.point_begin,
                                                    t.point_count, out.data()};
    const auto graph = ct::make_upward_graph(tree);
    for (int idle : {0, 1000, 500, 250})
      for (int blocks : {0, 264, 132}) {
        run("node", graph, node_level, node_ops, canopy::mode::continuation, blocks, 128, idle);
        run("twig", tg.graph, twig_level, twig_ops, canopy::mode::continuation, blocks, 256, idle);
        run("twig", tg.graph, twig_level, twig_ops, canopy::mode::lockfree_tree, blocks, 256, idle);
      }
  }
  cudaFree(db); cudaFree(de);
}
