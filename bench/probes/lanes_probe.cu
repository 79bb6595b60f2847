// SPDX-License-Identifier: Apache-2.0
// Tuning probe (not part of any suite): the upward pass as node tasks with lane groups of 2 and 4
// lanes per node and merge batches of 1 and 2 children (upward_ops<float, Lanes, MergeBatch>) in
// the three lock-free modes, on the sweep trees (probe_trees.cuh); validated against the double
// reference before timing, warm medians of CUDA events around run() (launch and wait). The lane
// sweeps of bench/RESULTS.md came from it. The baselines and the twig tasks on
// the same trees: twig_probe. The fixed costs of a launch and of a run: launch_probe.
// Usage: lanes_probe [max_depth=8]   (below 8 the depth-8 tree is left out)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "canopy/gpu_scheduler.cuh"
#include "canopy/passes/upward_pass.hpp"
#include "probe_common.cuh"
#include "probe_trees.cuh"

namespace {

template <int L, int B>
void run_tree(probe::tree_case& c, double copy, canopy::mode m) {
  canopy::scheduler_options o;
  o.mode = m;
  o.threads_per_block = 128;
  canopy::gpu_scheduler s(probe::ct::make_upward_graph(c.tree), o);
  const auto ops = probe::node_ops<L, B>(c);
  c.poison();
  const auto r = s.run(ops);
  const bool ok = r.ok() && c.valid();
  const double us = ok ? probe::median_us([&] { s.run(ops); }, c.reps) : -1;
  std::printf("%-20s lanes %d merge %d %-13s blocks %4d x 128  %s %10.1f us  %5.1f%% of copy\n", c.name.c_str(), L, B,
              canopy::to_string(m).data(), s.last_grid(), r.ok() ? (ok ? "ok  " : "BAD ") : "FAIL", us,
              ok ? c.percent_of_copy(us, copy) : 0.0);
  if (!r.ok()) std::printf("   %s\n", r.message.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  probe::for_each_sweep_case(argc > 1 ? std::atoi(argv[1]) : 8, [](probe::tree_case& c, double copy) {
    for (canopy::mode m : {canopy::mode::lockfree_tree, canopy::mode::lockfree, canopy::mode::continuation}) {
      run_tree<2, 1>(c, copy, m);
      run_tree<2, 2>(c, copy, m);
      run_tree<4, 2>(c, copy, m);
    }
  });
}
