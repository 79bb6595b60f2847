// SPDX-License-Identifier: Apache-2.0
// Whole upward passes on the CPU backend against the double reference: complete, uniform, Plummer
// and clustered trees over sizes 0, 1, odd and large, several seeds, every mode; with one task per
// node and with twig tasks (trees/twig_pass.hpp).
#include <gtest/gtest.h>

#include "canopy/cpu_scheduler.hpp"
#include "canopy/trees/generators.hpp"
#include "canopy/trees/octree.hpp"
#include "canopy/trees/reference.hpp"
#include "canopy/passes/twig_pass.hpp"
#include "canopy/passes/upward_pass.hpp"

namespace {
namespace ct = canopy::trees;

enum class tasks { node, twig };

void expect_matches_reference(const ct::octree& tree, canopy::mode m, int workers, const std::string& what,
                              tasks kind = tasks::node) {
  const ct::twig_graph twig = kind == tasks::twig ? ct::make_twig_graph(tree) : ct::twig_graph{};
  const auto graph = kind == tasks::twig ? twig.graph : ct::make_upward_graph(tree);
  canopy::scheduler_options opt;
  opt.mode = m;
  opt.blocks = workers;
  canopy::cpu_scheduler sched(graph, opt);
  const auto ref = ct::reference_upward_pass(tree);
  for (int rep = 0; rep < 2; ++rep) {
    // Poison the output: a node the run never wrote cannot pass.
    std::vector<ct::multipole<float>> out(static_cast<std::size_t>(tree.node_count()));
    for (auto& p : out) p.count = 0xdeadbeef;
    const auto r = kind == tasks::twig
                       ? sched.run(ct::host_twig_upward_ops<float>(tree, twig.tasks, out.data()))
                       : sched.run(ct::host_upward_ops(tree, out.data()));
    ASSERT_TRUE(r.ok()) << what << ": " << r.message;
    const auto cmp = ct::compare_payloads<float>(tree, out, ref);
    ASSERT_TRUE(cmp.within_tolerance) << what << " rep " << rep << ": " << cmp.summary();
  }
}

TEST(OctreeCpuBackend, CompleteTreesEveryMode) {
  for (int depth : {0, 1, 3}) {
    const auto tree = ct::build_complete_octree(depth, 8, 7);
    for (auto m : canopy::all_modes)
      expect_matches_reference(tree, m, 4, "complete depth " + std::to_string(depth) + " " + std::string(canopy::to_string(m)));
  }
}

TEST(OctreeCpuBackend, AdaptiveTreesOfEverySizeAndDistribution) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1001}, std::size_t{100000}}) {
    for (std::uint64_t seed : {1u, 2u}) {
      const std::vector<std::pair<const char*, std::vector<ct::point>>> sets = {
          {"uniform", ct::generate_uniform(n, seed)},
          {"plummer", ct::generate_plummer(n, seed)},
          {"clusters", ct::generate_clusters(n, seed)}};
      for (const auto& [name, pts] : sets) {
        const auto tree = ct::build_octree(pts, ct::build_options{8, 21});
        for (auto m : {canopy::mode::mutex, canopy::mode::lockfree, canopy::mode::continuation})
          expect_matches_reference(tree, m, 3,
                                   std::string(name) + " n=" + std::to_string(n) + " seed=" + std::to_string(seed) + " " +
                                       std::string(canopy::to_string(m)));
      }
    }
  }
}

TEST(OctreeCpuBackend, TwigTasksCompleteTreesEveryMode) {
  for (int depth : {0, 1, 2, 4}) {
    const auto tree = ct::build_complete_octree(depth, 8, 11);
    for (auto m : canopy::all_modes)
      expect_matches_reference(tree, m, 4, "twig tasks, complete depth " + std::to_string(depth) + " " +
                                               std::string(canopy::to_string(m)), tasks::twig);
  }
}

TEST(OctreeCpuBackend, TwigTasksAdaptiveTrees) {
  // Adaptive trees mix twigs, internal nodes with leaf and internal children, and leaves of every
  // size (leaves of one point, leaves of max_leaf points).
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{1001}, std::size_t{100000}}) {
    for (std::uint64_t seed : {3u, 4u}) {
      const std::vector<std::pair<const char*, std::vector<ct::point>>> sets = {
          {"uniform", ct::generate_uniform(n, seed)},
          {"plummer", ct::generate_plummer(n, seed)},
          {"clusters", ct::generate_clusters(n, seed)}};
      for (const auto& [name, pts] : sets) {
        const auto tree = ct::build_octree(pts, ct::build_options{16, 21});
        for (auto m : {canopy::mode::mutex, canopy::mode::all_threads, canopy::mode::lockfree, canopy::mode::continuation})
          expect_matches_reference(tree, m, 3,
                                   std::string("twig tasks, ") + name + " n=" + std::to_string(n) + " seed=" +
                                       std::to_string(seed) + " " + std::string(canopy::to_string(m)),
                                   tasks::twig);
      }
    }
  }
}

}  // namespace
