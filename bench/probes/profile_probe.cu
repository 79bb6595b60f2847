// SPDX-License-Identifier: Apache-2.0
// Tuning probe (not part of any suite): one tree, one twig-task mode, run `runs` times after a
// validated first run, so that a profiler (ncu -k regex:persistent_kernel --launch-skip N) can
// look at one warm run; prints the warm median.
// Usage: profile_probe [depth=8] [mode=continuation] [threads=256] [runs=3]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "canopy/gpu_scheduler.cuh"
#include "canopy/passes/twig_pass.hpp"
#include "probe_common.cuh"
#include "probe_trees.cuh"

int main(int argc, char** argv) {
  const int depth = argc > 1 ? std::atoi(argv[1]) : 8;
  const std::string mode_name = argc > 2 ? argv[2] : "continuation";
  const int threads = argc > 3 ? std::atoi(argv[3]) : 256;
  const int runs = argc > 4 ? std::atoi(argv[4]) : 3;
  const auto mode = canopy::parse_mode(mode_name);
  if (!mode) {
    std::fprintf(stderr, "unknown mode %s\n", mode_name.c_str());
    return 2;
  }
  probe::tree_case c = probe::complete_case(depth);
  const probe::device_twigs twigs(c.tree);
  canopy::scheduler_options o;
  o.threads_per_block = threads;
  o.mode = *mode;
  canopy::gpu_scheduler s(twigs.tg.graph, o);
  const auto ops = probe::twig_ops<2>(c, twigs);  // 2 lanes per leaf: trees::upward_lanes of 8 points per leaf
  c.poison();
  const auto r = s.run(ops);
  const bool ok = r.ok() && c.valid();
  std::printf("depth %d %s T%d: %s\n", depth, mode_name.c_str(), threads, ok ? "ok" : "BAD");
  if (!ok) return 1;
  std::printf("median %.1f us\n", probe::median_us([&] { s.run(ops); }, runs));
  return 0;
}
