// SPDX-License-Identifier: Apache-2.0
// Shared by the octree tuning probes (bench/probes, not part of any suite): the trees they sweep,
// built one at a time (depth 8 holds 134M points): a complete octree of depth 5, one of depth 8
// (left out when max_depth < 8), a 16M-point Plummer sphere with leaves of up to 32 points, and a
// complete octree of depth 7; each with its double reference, its device copy, a float payload
// array and its pass bytes. Every probe validates a result against the reference before timing it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "baselines/baselines.cuh"
#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/error.hpp"
#include "canopy/passes/device_octree.cuh"
#include "canopy/trees/generators.hpp"
#include "canopy/trees/reference.hpp"
#include "canopy/passes/twig_pass.hpp"
#include "common/gpu_timing.cuh"

namespace probe {

namespace ct = canopy::trees;

/// A tree with what a probe needs to run, check and time a pass over it.
struct tree_case {
  std::string name;
  ct::octree tree;
  std::vector<ct::multipole<double>> ref;
  ct::device_octree d;
  ct::device_payloads<float> out;
  ct::octree_ref t;  // device views
  double bytes;      // per pass (bench::upward_pass_bytes)
  int reps;          // timed runs: fewer on the big trees

  tree_case(std::string case_name, ct::octree built)
      : name(std::move(case_name)),
        tree(std::move(built)),
        ref(ct::reference_upward_pass(tree)),
        d(tree),
        out(tree.node_count()),
        t(d.ref()),
        bytes(static_cast<double>(canopy::bench::upward_pass_bytes(t))),
        reps(tree.node_count() > 1000000 ? 10 : 30) {}

  /// NaN in every payload, so that a node the pass misses fails the check.
  void poison() { CANOPY_CUDA_TRY(cudaMemset(out.data(), 0xff, out.bytes())); }
  /// Whether the payloads on the device are within the reference's tolerance.
  bool valid() const { return ct::compare_payloads<float>(tree, out.download(), ref).within_tolerance; }
  /// `us` as a share of the measured copy bandwidth (the ceiling of a bandwidth-bound pass).
  double percent_of_copy(double us, double copy_gbs) const { return 100.0 * bytes / (us * 1e-6) / 1e9 / copy_gbs; }
};

/// The complete octree of `depth` with 8 points per leaf (seed 1).
inline tree_case complete_case(int depth) {
  return tree_case("depth " + std::to_string(depth), ct::build_complete_octree(depth, 8, 1));
}

/// The sweep's trees in order: depth 5, depth 8, Plummer 16M leaf 32, depth 7.
inline constexpr int sweep_tree_count = 4;
inline tree_case sweep_case(int which) {
  if (which == 2)
    return tree_case("plummer 16M leaf 32", ct::build_octree(ct::generate_plummer(16u << 20, 1), ct::build_options{32, 21}));
  return complete_case(which == 0 ? 5 : which == 1 ? 8 : 7);
}

/// Measures the copy bandwidth (GB/s, printed), then calls f(c, copy) for each sweep tree;
/// `max_depth` is the deepest complete tree wanted (below 8 the depth-8 tree is left out).
template <class F>
void for_each_sweep_case(int max_depth, F&& f) {
  const double copy = canopy::bench::measure_copy_bandwidth();
  std::printf("copy bandwidth %.0f GB/s\n", copy);
  for (int which = 0; which < sweep_tree_count; ++which) {
    if (which == 1 && max_depth < 8) continue;
    tree_case c = sweep_case(which);
    f(c, copy);
  }
}

/// A tree's twig decomposition, its tasks on the device.
struct device_twigs {
  ct::twig_graph tg;
  canopy::device_buffer<ct::twig_task> tasks;
  explicit device_twigs(const ct::octree& tree) : tg(ct::make_twig_graph(tree)), tasks(tg.tasks) {}
};

/// The library's twig ops over `c` with `tasks` (the upward pass as twig tasks, L lanes per leaf).
template <int L>
ct::twig_upward_ops<float, L> twig_ops(const tree_case& c, const device_twigs& twigs) {
  const ct::octree_ref& t = c.t;
  return {twigs.tasks.data(), t.points, t.first_child, t.child_count, t.point_begin, t.point_count, c.out.data()};
}

/// The library's node ops over `c` (the upward pass as one task per node, L lanes per leaf; B is
/// upward_ops' third parameter, its default when not given).
template <int L, int... B>
ct::upward_ops<float, L, B...> node_ops(const tree_case& c) {
  const ct::octree_ref& t = c.t;
  return {t.points, t.first_child, t.child_count, t.point_begin, t.point_count, c.out.data()};
}

}  // namespace probe
