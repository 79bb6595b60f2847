// SPDX-License-Identifier: Apache-2.0
// Tuning probe (not part of any suite): where the time of a small run goes. Wraps the octree ops
// so that every task records its start and end (globaltimer), then prints, per tree level, when
// its first task started and its last one ended, relative to the run's first task, beside the
// CUDA-event time of the whole call (launch + wait) and of the same run without the stamps
// ("plain"). Node tasks in continuation and twig tasks in continuation and lockfree-tree, by idle
// sleep cap and grid. Validated before timing.
// Usage: timeline_probe [depth=5]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "canopy/cuda/device_buffer.hpp"
#include "canopy/gpu_scheduler.cuh"
#include "canopy/passes/twig_pass.hpp"
#include "canopy/passes/upward_pass.hpp"
#include "probe_common.cuh"
#include "probe_trees.cuh"

namespace {

namespace ct = probe::ct;

// Forwards Inner::tasks_per_group when Inner declares it, and declares nothing otherwise, so that
// the scheduler picks the same batch for the wrapper as for Inner (its default stays its own).
template <class Inner, bool = requires { Inner::tasks_per_group; }>
struct tasks_per_group_of {};
template <class Inner>
struct tasks_per_group_of<Inner, true> {
  static constexpr int tasks_per_group = Inner::tasks_per_group;
};

template <class Inner>
struct timed_ops : tasks_per_group_of<Inner> {
  static constexpr int group_size = Inner::group_size;
  // As Inner, so that the kernel is the one the pass runs (canopy/lane_group.cuh).
  static constexpr bool tree_only = [] {
    if constexpr (requires { Inner::tree_only; }) return static_cast<bool>(Inner::tree_only);
    else return false;
  }();
  Inner inner;
  unsigned long long* begin;
  unsigned long long* end;
  timed_ops(const Inner& i, unsigned long long* b, unsigned long long* e) : inner(i), begin(b), end(e) {}
  __host__ __device__ void operator()(canopy::task_id t) const { inner(t); }
  // Forward the prefetch hints when Inner has them, so that the timeline is of the real pass.
  __device__ void prefetch(canopy::task_id t, canopy::prefetch_stage s) const
    requires requires(const Inner& i) { i.prefetch(t, s); }
  { inner.prefetch(t, s); }
  template <int G>
  __device__ void operator()(canopy::task_id t, const canopy::lane_group<G>& g) const {
    if (g.rank == 0) begin[t] = probe::global_timer_ns();
    inner(t, g);
    g.sync();
    if (g.rank == 0) end[t] = probe::global_timer_ns();
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
      if (task_level[t] == l) {
        lo = std::min(lo, b[t]);
        hi = std::max(hi, e[t]);
      }
    if (hi == 0) continue;
    std::printf(" L%d %.1f-%.1f", l, (lo - t0) * 1e-3, (hi - t0) * 1e-3);
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const int depth = argc > 1 ? std::atoi(argv[1]) : 5;
  probe::tree_case c = probe::complete_case(depth);
  const probe::device_twigs twigs(c.tree);
  const ct::twig_graph& tg = twigs.tg;
  const std::size_t n = std::max<std::size_t>(static_cast<std::size_t>(c.tree.node_count()), tg.tasks.size());
  canopy::device_buffer<unsigned long long> db(n), de(n);

  auto run = [&](const std::string& name, const canopy::task_graph& graph, const std::vector<int>& task_level, auto inner,
                 canopy::mode m, int blocks, int threads, int idle_ns) {
    canopy::scheduler_options o;
    o.mode = m;
    o.blocks = blocks;
    o.threads_per_block = threads;
    o.idle_sleep_max = std::chrono::nanoseconds(idle_ns);
    canopy::gpu_scheduler s(graph, o);
    const timed_ops<decltype(inner)> ops(inner, db.data(), de.data());
    c.poison();
    const auto r = s.run(ops);
    if (!r.ok() || !c.valid()) {
      std::printf("%s: FAILED %s\n", name.c_str(), r.message.c_str());
      return;
    }
    const double plain = probe::median_us([&] { s.run(inner); }, 50);  // without the stamps
    const double us = probe::median_us([&] { s.run(ops); }, 50);
    const auto k = static_cast<std::size_t>(graph.task_count());
    std::vector<unsigned long long> b = db.download(), e = de.download();
    b.resize(k);
    e.resize(k);
    char what[160];
    std::snprintf(what, sizeof what, "%s %s %dx%d idle %d (plain %.1f)", name.c_str(), canopy::to_string(m).data(), s.last_grid(),
                  threads, idle_ns, plain);
    print_timeline(what, task_level, c.tree.depth + 1, b, e, us);
  };

  const std::vector<int> node_level(c.tree.level.begin(), c.tree.level.end());
  std::vector<int> twig_level(tg.tasks.size());
  for (std::size_t i = 0; i < tg.tasks.size(); ++i) twig_level[i] = node_level[static_cast<std::size_t>(tg.tasks[i].node())];
  std::printf("depth %d: %d nodes, twig graph %d tasks\n", depth, c.tree.node_count(), tg.graph.task_count());
  constexpr int L = 2;  // trees::upward_lanes of 8 points per leaf
  const auto node_ops = probe::node_ops<L>(c);
  const auto twig_ops = probe::twig_ops<L>(c, twigs);
  const auto graph = ct::make_upward_graph(c.tree);
  for (int idle : {0, 1000, 500, 250})
    for (int blocks : {0, 264, 132}) {
      run("node", graph, node_level, node_ops, canopy::mode::continuation, blocks, 128, idle);
      run("twig", tg.graph, twig_level, twig_ops, canopy::mode::continuation, blocks, 256, idle);
      run("twig", tg.graph, twig_level, twig_ops, canopy::mode::lockfree_tree, blocks, 256, idle);
    }
}
