// Shared by the octree tuning probes in tools/dev (not part of the suite): the trees they sweep,
// built one at a time (depth 8 holds 134M points): a complete octree of depth 5, one of depth 8
// (left out when max_depth < 8), a 16M-point Plummer sphere with leaves of up to 32 points, and a
// complete octree of depth 7;
// each with its double reference, its device copy, a float payload array and its pass bytes.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "baselines/baselines.cuh"
#include "common/gpu_timing.cuh"
#include "canopy/trees/device_octree.cuh"
#include "canopy/trees/generators.hpp"
#include "canopy/trees/reference.hpp"
#include "canopy/trees/twig_pass.hpp"

inline constexpr int probe_tree_count = 4;

inline bool probe_tree_wanted(int which, int max_depth) { return which != 1 || max_depth >= 8; }

struct probe_case {
  std::string name;
  canopy::trees::octree tree;
  std::vector<canopy::trees::multipole<double>> ref;
  canopy::trees::device_octree d;
  canopy::trees::device_payloads<float> out;
  canopy::trees::octree_ref t;  // device views
  double bytes;                 // per pass (bench::upward_pass_bytes)
  int reps;                     // timed runs: fewer on the big trees

  explicit probe_case(int which)
      : name(which == 0 ? "depth 5" : which == 1 ? "depth 8" : which == 2 ? "plummer 16M leaf 32" : "depth 7"),
        tree(which == 0   ? canopy::trees::build_complete_octree(5, 8, 1)
             : which == 1 ? canopy::trees::build_complete_octree(8, 8, 1)
             : which == 3 ? canopy::trees::build_complete_octree(7, 8, 1)
                          : canopy::trees::build_octree(canopy::trees::generate_plummer(16u << 20, 1),
                                                        canopy::trees::build_options{32, 21})),
        ref(canopy::trees::reference_upward_pass(tree)),
        d(tree),
        out(tree.node_count()),
        t(d.ref()),
        bytes(static_cast<double>(canopy::bench::upward_pass_bytes(t))),
        reps(tree.node_count() > 1000000 ? 10 : 30) {}
};

/// Measures the copy bandwidth (GB/s, printed), then calls f(c, copy) for each probe tree; argv[1]
/// is the deepest complete tree wanted (8 by default; below 8 the depth-8 tree is left out).
template <class F>
void for_each_probe_case(int argc, char** argv, F&& f) {
  const int max_depth = argc > 1 ? std::atoi(argv[1]) : 8;
  const double copy = canopy::bench::measure_copy_bandwidth();
  std::printf("copy bandwidth %.0f GB/s\n", copy);
  for (int which = 0; which < probe_tree_count; ++which) {
    if (!probe_tree_wanted(which, max_depth)) continue;
    probe_case c(which);
    f(c, copy);
  }
}

/// A twig decomposition's tasks uploaded to the device (freed with this).
struct device_twig_tasks {
  canopy::trees::twig_task* data = nullptr;
  explicit device_twig_tasks(const std::vector<canopy::trees::twig_task>& tasks) {
    cudaMalloc(&data, sizeof(canopy::trees::twig_task) * tasks.size());
    cudaMemcpy(data, tasks.data(), sizeof(canopy::trees::twig_task) * tasks.size(), cudaMemcpyHostToDevice);
  }
  device_twig_tasks(const device_twig_tasks&) = delete;
  device_twig_tasks& operator=(const device_twig_tasks&) = delete;
  ~device_twig_tasks() { cudaFree(data); }
  operator canopy::trees::twig_task*() const { return data; }
};

/// A tree's twig decomposition, its tasks on the device.
struct probe_twigs {
  canopy::trees::twig_graph tg;
  device_twig_tasks uploaded;
  explicit probe_twigs(const canopy::trees::octree& tree) : tg(canopy::trees::make_twig_graph(tree)), uploaded(tg.tasks) {}
};

/// A complete octree of `depth` (8 points per leaf) with its double reference, device copy, float
/// payloads and twig decomposition, the twig tasks uploaded (the timeline and profile probes).
struct twig_setup {
  canopy::trees::octree tree;
  std::vector<canopy::trees::multipole<double>> ref;
  canopy::trees::device_octree d;
  canopy::trees::device_payloads<float> out;
  canopy::trees::octree_ref t;  // device views
  canopy::trees::twig_graph tg;
  device_twig_tasks tasks;  // tg.tasks on the device

  explicit twig_setup(int depth)
      : tree(canopy::trees::build_complete_octree(depth, 8, 1)),
        ref(canopy::trees::reference_upward_pass(tree)),
        d(tree),
        out(tree.node_count()),
        t(d.ref()),
        tg(canopy::trees::make_twig_graph(tree)),
        tasks(tg.tasks) {}
  bool valid() const { return canopy::trees::compare_payloads<float>(tree, out.download(), ref).within_tolerance; }
};
