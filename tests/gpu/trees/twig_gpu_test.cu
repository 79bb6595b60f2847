// SPDX-License-Identifier: Apache-2.0
// Twig tasks (canopy/passes/twig_pass.hpp) on the GPU backend against the double reference: every
// mode, lane counts 1, 2 and 4 per leaf, complete trees and adaptive ones (which mix twigs, plain
// internal nodes and leaves that are tasks of their own), grids of one block and of every
// co-resident block, two runs each (the second checks the counters' reset). Label `gpu`.
#include <gtest/gtest.h>

#include <canopy/gpu_scheduler.cuh>
#include <canopy/passes/device_octree.cuh>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/reference.hpp>
#include <canopy/passes/twig_pass.hpp>
#include <canopy/passes/upward_pass.hpp>

#include <string>
#include <vector>

#include "gpu_test.hpp"

namespace {
namespace ct = canopy::trees;

class twig_gpu : public canopy::test::gpu_test {};

template <int L>
void expect_twig_runs_match(const ct::octree& tree, canopy::mode m, int blocks, const std::string& what) {
  const ct::twig_graph tg = ct::make_twig_graph(tree);
  const auto ref = ct::reference_upward_pass(tree);
  ct::device_octree d(tree);
  ct::device_payloads<float> out(tree.node_count());
  canopy::device_buffer<ct::twig_task> tasks(tg.tasks);
  canopy::scheduler_options o;
  o.mode = m;
  o.blocks = blocks;
  o.threads_per_block = 256;
  canopy::gpu_scheduler sched(tg.graph, o);
  const ct::octree_ref t = d.ref();
  const ct::twig_upward_ops<float, L> ops{tasks.data(), t.points, t.first_child, t.child_count, t.point_begin,
                                          t.point_count, out.data()};
  for (int run = 0; run < 2; ++run) {
    std::vector<ct::multipole<float>> poison(static_cast<std::size_t>(tree.node_count()));
    for (auto& p : poison) p.count = 0xdeadbeef;
    out.upload(poison);
    const auto r = sched.run(ops);
    ASSERT_TRUE(r.ok()) << what << ", run " << run << ": " << canopy::to_string(r.code) << ": " << r.message;
    const auto cmp = ct::compare_payloads<float>(tree, out.download(), ref);
    ASSERT_TRUE(cmp.within_tolerance) << what << ", run " << run << ": " << cmp.summary();
  }
}

std::vector<std::pair<std::string, ct::octree>> trees_to_check() {
  std::vector<std::pair<std::string, ct::octree>> out;
  for (int depth : {0, 1, 3, 5}) out.emplace_back("complete depth " + std::to_string(depth), ct::build_complete_octree(depth, 8, 5));
  out.emplace_back("complete depth 3, 1 point per leaf", ct::build_complete_octree(3, 1, 6));
  out.emplace_back("plummer 1", ct::build_octree(ct::generate_plummer(1, 1), ct::build_options{16, 21}));
  out.emplace_back("plummer 1001", ct::build_octree(ct::generate_plummer(1001, 2), ct::build_options{16, 21}));
  out.emplace_back("plummer 100000", ct::build_octree(ct::generate_plummer(100000, 3), ct::build_options{32, 21}));
  out.emplace_back("clusters 50000", ct::build_octree(ct::generate_clusters(50000, 4), ct::build_options{8, 21}));
  out.emplace_back("uniform 20000", ct::build_octree(ct::generate_uniform(20000, 5), ct::build_options{16, 21}));
  return out;
}

TEST_F(twig_gpu, every_mode_equals_the_reference) {
  for (const auto& [name, tree] : trees_to_check()) {
    for (canopy::mode m : canopy::all_modes) {
      // The locked modes are the seed's slow designs: keep them to the smaller trees.
      if (!canopy::traits_of(m).atomic_tree && tree.node_count() > 20000) continue;
      expect_twig_runs_match<2>(tree, m, 0, name + ", " + std::string(canopy::to_string(m)) + ", full grid");
    }
  }
}

TEST_F(twig_gpu, lane_counts_and_a_single_block) {
  for (const auto& [name, tree] : trees_to_check()) {
    for (canopy::mode m : {canopy::mode::lockfree_tree, canopy::mode::lockfree, canopy::mode::continuation}) {
      const std::string what = name + ", " + std::string(canopy::to_string(m));
      expect_twig_runs_match<1>(tree, m, 0, what + ", 1 lane per leaf");
      expect_twig_runs_match<4>(tree, m, 0, what + ", 4 lanes per leaf");
      expect_twig_runs_match<2>(tree, m, 1, what + ", one block");
    }
  }
}

}  // namespace
