// Tuning probe (not part of the suite): one tree, one twig-task mode, run `runs` times after a
// validated first run, so that a profiler (ncu -k regex:persistent_kernel --launch-skip N) can
// look at one warm run. Usage: profile_probe [depth=8] [mode=continuation] [threads=256] [runs=3]
// Build like twig_probe.cu.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <string>
#include "canopy/gpu_scheduler.cuh"
#include "canopy/trees/device_octree.cuh"
#include "canopy/trees/generators.hpp"
#include "canopy/trees/reference.hpp"
#include "canopy/trees/twig_pass.hpp"
#include "probe_timing.cuh"
#include "probe_trees.cuh"

namespace ct = canopy::trees;

int main(int argc, char** argv) {
  const int depth = argc > 1 ? std::atoi(argv[1]) : 8;
  const std::string mode_name = argc > 2 ? argv[2] : "continuation";
  const int threads = argc > 3 ? std::atoi(argv[3]) : 256;
  const int runs = argc > 4 ? std::atoi(argv[4]) : 3;
  const auto mode = canopy::parse_mode(mode_name);
  if (!mode) { std::fprintf(stderr, "unknown mode %s\n", mode_name.c_str()); return 2; }
  twig_setup setup(depth);
  const auto& [tree, ref, d, out, t, tg, tasks] = setup;
  canopy::scheduler_options o;
  o.threads_per_block = threads;
  o.mode = *mode;
  canopy::gpu_scheduler s(tg.graph, o);
  const ct::twig_upward_ops<float, 2> ops{tasks, t.points, t.first_child, t.child_count, t.point_begin, t.point_count,
                                          out.data()};
  const auto r = s.run(ops);
  const bool ok = r.ok() && setup.valid();
  std::printf("depth %d %s T%d: %s\n", depth, mode_name.c_str(), threads, ok ? "ok" : "BAD");
  if (!ok) return 1;
  std::printf("median %.1f us\n", median_us([&] { s.run(ops); }, runs));
  return 0;
}
