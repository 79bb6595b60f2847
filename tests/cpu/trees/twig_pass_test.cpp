// The twig decomposition (canopy/passes/twig_pass.hpp): which nodes become tasks, the graph's
// shape, the source order, and the serial twig operation against the double reference.
#include <canopy/trees/generators.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/reference.hpp>
#include <canopy/passes/twig_pass.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {
namespace ct = canopy::trees;

// Checks every structural promise of make_twig_graph against the tree itself.
void expect_well_formed(const ct::octree& tree, const ct::twig_graph& tg, const std::string& what) {
  const auto nodes = static_cast<std::size_t>(tree.node_count());
  ASSERT_EQ(tg.graph.task_count(), static_cast<std::int32_t>(tg.tasks.size())) << what;
  // Each node is computed exactly once: by its own task, or by its parent's twig task.
  std::vector<int> computed(nodes, 0);
  std::vector<std::int32_t> task_of(nodes, -1);
  std::int32_t twigs = 0;
  for (std::size_t t = 0; t < tg.tasks.size(); ++t) {
    const std::int32_t e = tg.tasks[t].entry;
    const std::int32_t n = e < 0 ? ~e : e;
    ASSERT_GE(n, 0) << what;
    ASSERT_LT(static_cast<std::size_t>(n), nodes) << what;
    // The task carries its node's structure (read with the entry in one load on the GPU).
    EXPECT_EQ(tg.tasks[t].node(), n) << what;
    EXPECT_EQ(tg.tasks[t].is_twig(), e < 0) << what;
    EXPECT_EQ(tg.tasks[t].first_child, tree.first_child[n]) << what << ": task " << t;
    EXPECT_EQ(tg.tasks[t].child_count, tree.child_count[n]) << what << ": task " << t;
    EXPECT_EQ(tg.tasks[t].reserved, 0) << what;
    task_of[static_cast<std::size_t>(n)] = static_cast<std::int32_t>(t);
    ++computed[static_cast<std::size_t>(n)];
    if (e < 0) {
      ++twigs;
      ASSERT_GT(tree.child_count[n], 0) << what << ": twig " << n << " is a leaf";
      for (std::int32_t c = tree.first_child[n]; c < tree.first_child[n] + tree.child_count[n]; ++c) {
        EXPECT_EQ(tree.child_count[c], 0) << what << ": twig " << n << " has an internal child " << c;
        ++computed[static_cast<std::size_t>(c)];
      }
    } else if (tree.child_count[n] > 0) {
      // A plain internal task is no twig: some child is internal.
      bool any_internal = false;
      for (std::int32_t c = tree.first_child[n]; c < tree.first_child[n] + tree.child_count[n]; ++c)
        any_internal = any_internal || tree.child_count[c] > 0;
      EXPECT_TRUE(any_internal) << what << ": node " << n << " should be a twig";
    }
  }
  EXPECT_EQ(twigs, tg.twig_count) << what;
  for (std::size_t n = 0; n < nodes; ++n) EXPECT_EQ(computed[n], 1) << what << ": node " << n;
  // Dependencies: a task's successor is the task of its node's parent.
  for (std::size_t t = 0; t < tg.tasks.size(); ++t) {
    const std::int32_t n = tg.tasks[t].node(), p = tree.parent[n];
    EXPECT_EQ(tg.graph.parent()[t], p < 0 ? canopy::no_task : task_of[static_cast<std::size_t>(p)]) << what;
  }
  // Sources in Morton order: increasing first point.
  const auto& sources = tg.graph.sources();
  for (std::size_t i = 1; i < sources.size(); ++i) {
    const auto first_point = [&](canopy::task_id t) {
      return tree.point_begin[tg.tasks[static_cast<std::size_t>(t)].node()];
    };
    EXPECT_LT(first_point(sources[i - 1]), first_point(sources[i])) << what << ": sources out of Morton order at " << i;
  }
}

// Runs the serial twig operation in task order reversed (children before parents: node ids are
// level-ordered, and so are tasks) and compares with the reference.
void expect_serial_matches_reference(const ct::octree& tree, const ct::twig_graph& tg, const std::string& what) {
  std::vector<ct::multipole<double>> out(static_cast<std::size_t>(tree.node_count()));
  for (auto& p : out) p.count = 0xdeadbeef;
  for (std::size_t i = tg.tasks.size(); i-- > 0;)
    ct::twig_task_serial<double>(tree.points.data(), tree.first_child.data(), tree.child_count.data(),
                                 tree.point_begin.data(), tree.point_count.data(), out.data(), tg.tasks[i].entry);
  const auto cmp = ct::compare_payloads<double>(tree, out, ct::reference_upward_pass(tree));
  EXPECT_TRUE(cmp.within_tolerance) << what << ": " << cmp.summary();
}

TEST(TwigGraph, CompleteTreeHasATaskPerInternalNodeAndTwigsAsSources) {
  const auto tree = ct::build_complete_octree(3, 4, 1);  // 512 leaves, 73 internal nodes
  const auto tg = ct::make_twig_graph(tree);
  EXPECT_EQ(tg.graph.task_count(), 73);
  EXPECT_EQ(tg.twig_count, 64);
  EXPECT_EQ(tg.graph.sources().size(), 64u);
  EXPECT_EQ(tg.graph.sink_count(), 1);
  for (canopy::task_id s : tg.graph.sources()) EXPECT_TRUE(tg.tasks[static_cast<std::size_t>(s)].is_twig()) << "source " << s;
  expect_well_formed(tree, tg, "complete depth 3");
  expect_serial_matches_reference(tree, tg, "complete depth 3");
}

TEST(TwigGraph, DepthOneTreeIsOneTwig) {
  const auto tree = ct::build_complete_octree(1, 8, 2);
  const auto tg = ct::make_twig_graph(tree);
  ASSERT_EQ(tg.graph.task_count(), 1);
  EXPECT_EQ(tg.tasks[0].entry, ~0);
  expect_serial_matches_reference(tree, tg, "complete depth 1");
}

TEST(TwigGraph, SingleLeafAndEmptyTrees) {
  const auto one = ct::build_complete_octree(0, 3, 1);  // the root is the only leaf
  const auto tg = ct::make_twig_graph(one);
  ASSERT_EQ(tg.graph.task_count(), 1);
  EXPECT_EQ(tg.tasks[0].entry, 0);
  EXPECT_EQ(tg.twig_count, 0);
  expect_serial_matches_reference(one, tg, "single leaf");

  const auto empty = ct::build_octree({}, ct::build_options{});  // one empty root leaf
  const auto te = ct::make_twig_graph(empty);
  ASSERT_EQ(empty.node_count(), 1);
  ASSERT_EQ(te.graph.task_count(), 1);
  EXPECT_EQ(te.tasks[0].entry, 0);
  expect_well_formed(empty, te, "empty set");
  expect_serial_matches_reference(empty, te, "empty set");
}

TEST(TwigGraph, AdaptiveTreesMixTwigsPlainNodesAndLeaves) {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    for (std::size_t n : {std::size_t{1}, std::size_t{17}, std::size_t{5000}, std::size_t{60000}}) {
      const std::vector<std::pair<const char*, std::vector<ct::point>>> sets = {
          {"uniform", ct::generate_uniform(n, seed)},
          {"plummer", ct::generate_plummer(n, seed)},
          {"clusters", ct::generate_clusters(n, seed)}};
      for (const auto& [name, pts] : sets) {
        const auto tree = ct::build_octree(pts, ct::build_options{8, 21});
        const auto tg = ct::make_twig_graph(tree);
        const std::string what = std::string(name) + " n=" + std::to_string(n) + " seed=" + std::to_string(seed);
        expect_well_formed(tree, tg, what);
        expect_serial_matches_reference(tree, tg, what);
      }
    }
  }
}

TEST(TwigGraph, PlummerTreeHasUnfusedLeaves) {
  // The case the decomposition must get right: parents with both leaf and internal children.
  const auto tree = ct::build_octree(ct::generate_plummer(20000, 9), ct::build_options{8, 21});
  const auto tg = ct::make_twig_graph(tree);
  std::int32_t unfused_leaves = 0;
  for (const ct::twig_task& t : tg.tasks)
    if (!t.is_twig() && tree.child_count[t.entry] == 0) ++unfused_leaves;
  EXPECT_GT(unfused_leaves, 0);
  EXPECT_GT(tg.twig_count, 0);
  EXPECT_LT(tg.graph.task_count(), tree.node_count());
}

}  // namespace
