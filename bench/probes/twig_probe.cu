// SPDX-License-Identifier: Apache-2.0
// Tuning probe (not part of any suite): node tasks (upward_pass.hpp) against twig tasks
// (twig_pass.hpp) and the baselines, on the sweep trees (probe_trees.cuh); every result is
// validated against the double reference before it is timed (warm medians, CUDA events around
// run(), i.e. launch and wait).
// With --ab, only the twig pass in continuation and lockfree-tree at 128 and 256 threads, with
// 200 samples on the small trees (depth 5's spread between processes is ~3 us): the A/B runs of
// bench/RESULTS.md alternate two builds of this probe (one per runtime version) in one device call.
// Usage: twig_probe [max_depth=8] [--ab]   (below 8 the depth-8 tree is left out)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "baselines/baselines.cuh"
#include "canopy/gpu_scheduler.cuh"
#include "canopy/passes/twig_pass.hpp"
#include "canopy/passes/upward_pass.hpp"
#include "probe_common.cuh"
#include "probe_trees.cuh"

namespace {

namespace ct = probe::ct;

struct reporter {
  const probe::tree_case& c;
  double copy;
  void operator()(const std::string& what, bool ok, double us) const {
    std::printf("%-20s %-34s %s %10.1f us  %5.1f%% of copy\n", c.name.c_str(), what.c_str(), ok ? "ok " : "BAD", us,
                ok ? c.percent_of_copy(us, copy) : 0.0);
  }
};

// Poisons, runs once, validates; then the warm median of `samples` runs (or -1 when wrong).
template <class Ops>
void check_and_time(probe::tree_case& c, const reporter& report, canopy::gpu_scheduler& s, const Ops& ops,
                    const std::string& what, int samples) {
  c.poison();
  const auto r = s.run(ops);
  const bool ok = r.ok() && c.valid();
  report(what, ok, ok ? probe::median_us([&] { s.run(ops); }, samples) : -1);
  if (!r.ok()) std::printf("   %s\n", r.message.c_str());
}

std::string mode_name(canopy::mode m) { return std::string(canopy::to_string(m)); }

void ab(probe::tree_case& c, double copy) {
  const reporter report{c, copy};
  const probe::device_twigs twigs(c.tree);
  const int samples = c.tree.node_count() < 100000 ? 200 : c.reps;
  for (int threads : {128, 256}) {
    canopy::scheduler_options o;
    o.threads_per_block = threads;
    canopy::gpu_scheduler s(twigs.tg.graph, o);
    ct::with_twig_lanes(ct::upward_lanes(c.tree), [&](auto L) {
      const auto ops = probe::twig_ops<L()>(c, twigs);
      for (auto m : {canopy::mode::continuation, canopy::mode::lockfree_tree}) {
        s.set_mode(m);
        check_and_time(c, report, s, ops, "twig " + mode_name(m) + " T" + std::to_string(threads), samples);
      }
      return 0;
    });
  }
}

void sweep(probe::tree_case& c, double copy) {
  const reporter report{c, copy};
  {
    canopy::bench::baseline_runner runner(c.d, c.out);
    for (auto k : canopy::bench::all_baseline_kinds) {
      c.poison();
      runner.run(k);
      CANOPY_CUDA_TRY(cudaDeviceSynchronize());
      const bool ok = c.valid();
      report(std::string(canopy::bench::to_string(k)), ok,
             probe::median_us([&] { runner.run(k); CANOPY_CUDA_TRY(cudaStreamSynchronize(nullptr)); }, c.reps));
    }
  }
  const auto modes = {canopy::mode::lockfree_tree, canopy::mode::lockfree, canopy::mode::continuation};
  {
    canopy::gpu_scheduler s(ct::make_upward_graph(c.tree), canopy::scheduler_options{});
    ct::with_upward_lanes(ct::upward_lanes(c.tree), [&](auto L) {
      const auto ops = probe::node_ops<L()>(c);
      for (auto m : modes) {
        s.set_mode(m);
        check_and_time(c, report, s, ops, "node tasks " + mode_name(m) + " L" + std::to_string(L()), c.reps);
      }
      return 0;
    });
  }
  const probe::device_twigs twigs(c.tree);
  std::printf("%-20s twig graph: %d tasks (%d twigs) for %d nodes\n", c.name.c_str(), twigs.tg.graph.task_count(),
              twigs.tg.twig_count, c.tree.node_count());
  for (int threads : {128, 256, 512}) {
    canopy::scheduler_options o;
    o.threads_per_block = threads;
    canopy::gpu_scheduler s(twigs.tg.graph, o);
    ct::with_twig_lanes(ct::upward_lanes(c.tree), [&](auto L) {
      const auto ops = probe::twig_ops<L()>(c, twigs);
      for (auto m : modes) {
        s.set_mode(m);
        check_and_time(c, report, s, ops,
                       "twig tasks " + mode_name(m) + " L" + std::to_string(L()) + " T" + std::to_string(threads), c.reps);
      }
      return 0;
    });
  }
  if (c.tree.node_count() < 100000) {
    // A small tree: does a smaller grid (a cheaper launch) pay?
    for (int threads : {128, 256})
      for (int blocks : {33, 66, 132, 264}) {
        canopy::scheduler_options o;
        o.threads_per_block = threads;
        o.blocks = blocks;
        o.mode = canopy::mode::continuation;
        canopy::gpu_scheduler s(twigs.tg.graph, o);
        ct::with_twig_lanes(ct::upward_lanes(c.tree), [&](auto L) {
          check_and_time(c, report, s, probe::twig_ops<L()>(c, twigs),
                         "twig continuation T" + std::to_string(threads) + " B" + std::to_string(blocks), c.reps);
          return 0;
        });
      }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int max_depth = 8;
  bool ab_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ab")) ab_only = true;
    else max_depth = std::atoi(argv[i]);
  }
  probe::for_each_sweep_case(max_depth, [&](probe::tree_case& c, double copy) { ab_only ? ab(c, copy) : sweep(c, copy); });
}
