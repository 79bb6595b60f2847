// SPDX-License-Identifier: Apache-2.0
// The twig decomposition (canopy/passes/twig_pass.hpp): which nodes become tasks, the graph's
// shape, the source order, and the serial twig operation against the double reference.
#include <canopy/trees/generators.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/reference.hpp>
#include <canopy/passes/twig_pass.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

namespace {
namespace ct = canopy::trees;

// Checks every structural promise of make_twig_graph against the tree itself.
void expect_well_formed(const ct::octree& tree, const ct::twig_graph& tg, const std::string& what) {
  const auto nodes = static_cast<std::size_t>(tree.node_count());
  ASSERT_EQ(tg.graph.task_count(), static_cast<std::int32_t>(tg.tasks.size())) << what;
  // Each node is computed exactly once: an internal node by its own task, a leaf by its parent's
  // twig or leaf group (a single root leaf by its own task).
  std::vector<int> computed(nodes, 0);
  std::vector<std::int32_t> task_of(nodes, -1), group_of(nodes, -1);
  std::int32_t twigs = 0, groups = 0;
  for (std::size_t t = 0; t < tg.tasks.size(); ++t) {
    const ct::twig_task& task = tg.tasks[t];
    const std::int32_t e = task.entry;
    const std::int32_t n = e < 0 ? ~e : e;
    ASSERT_GE(n, 0) << what;
    ASSERT_LT(static_cast<std::size_t>(n), nodes) << what;
    // The task carries its node's structure (read with the entry in one load on the GPU).
    EXPECT_EQ(task.node(), n) << what;
    EXPECT_EQ(task.computes_leaves(), e < 0) << what;
    EXPECT_EQ(task.first_child, tree.first_child[n]) << what << ": task " << t;
    EXPECT_EQ(task.child_count, tree.child_count[n]) << what << ": task " << t;
    std::int32_t leaves = 0;  // which children are leaves
    for (std::int32_t c = 0; c < tree.child_count[n]; ++c)
      if (tree.child_count[tree.first_child[n] + c] == 0) leaves |= 1 << c;
    const bool all_leaves = tree.child_count[n] > 0 && leaves == (1 << tree.child_count[n]) - 1;
    if (e >= 0) {  // the node's own merge, or the single root leaf
      if (tree.child_count[n] == 0) {
        EXPECT_LT(tree.parent[n], 0) << what << ": leaf " << n << " is a task";
      }
      EXPECT_FALSE(all_leaves) << what << ": node " << n << " should be a twig";
      EXPECT_EQ(task.leaf_mask, 0) << what << ": task " << t;
      EXPECT_EQ(task_of[static_cast<std::size_t>(n)], -1) << what << ": node " << n << " has two tasks";
      task_of[static_cast<std::size_t>(n)] = static_cast<std::int32_t>(t);
      ++computed[static_cast<std::size_t>(n)];
    } else {
      EXPECT_EQ(task.leaf_mask, leaves) << what << ": task " << t << " must compute exactly the leaf children";
      EXPECT_NE(leaves, 0) << what << ": task " << t << " reads points of no leaf";
      EXPECT_EQ(task.is_twig(), all_leaves) << what;
      EXPECT_EQ(task.is_leaf_group(), !all_leaves) << what;
      for (std::int32_t c = 0; c < tree.child_count[n]; ++c)
        if ((leaves >> c) & 1) ++computed[static_cast<std::size_t>(tree.first_child[n] + c)];
      if (all_leaves) {
        ++twigs;
        task_of[static_cast<std::size_t>(n)] = static_cast<std::int32_t>(t);
        ++computed[static_cast<std::size_t>(n)];
      } else {
        ++groups;
        group_of[static_cast<std::size_t>(n)] = static_cast<std::int32_t>(t);
        // Right after its node's task (the device builder numbers it task_of[n] + 1).
        EXPECT_EQ(task_of[static_cast<std::size_t>(n)], static_cast<std::int32_t>(t) - 1) << what << ": group of " << n;
      }
    }
  }
  EXPECT_EQ(twigs, tg.twig_count) << what;
  for (std::size_t n = 0; n < nodes; ++n) EXPECT_EQ(computed[n], 1) << what << ": node " << n;
  // Dependencies: a node's task waits for its internal children's tasks and its leaf group; a
  // leaf group is waited for by its node's task.
  for (std::size_t t = 0; t < tg.tasks.size(); ++t) {
    const std::int32_t n = tg.tasks[t].node(), p = tree.parent[n];
    const canopy::task_id want = tg.tasks[t].is_leaf_group()
                                     ? task_of[static_cast<std::size_t>(n)]
                                     : (p < 0 ? canopy::no_task : task_of[static_cast<std::size_t>(p)]);
    EXPECT_EQ(tg.graph.parent()[t], want) << what << ": task " << t;
  }
  // The sources are the twigs and the leaf groups (or the single root leaf), in Morton order:
  // increasing first leaf point.
  const auto& sources = tg.graph.sources();
  EXPECT_EQ(sources.size(), static_cast<std::size_t>(twigs + groups > 0 ? twigs + groups : 1)) << what;
  const auto first_point = [&](canopy::task_id s) {
    const ct::twig_task& task = tg.tasks[static_cast<std::size_t>(s)];
    if (!task.computes_leaves()) return tree.point_begin[task.node()];
    return tree.point_begin[task.first_child + std::countr_zero(static_cast<std::uint32_t>(task.leaf_mask))];
  };
  for (const canopy::task_id s : sources) {
    const ct::twig_task& task = tg.tasks[static_cast<std::size_t>(s)];
    EXPECT_TRUE(task.computes_leaves() || tree.child_count[task.node()] == 0) << what << ": source " << s;
  }
  for (std::size_t i = 1; i < sources.size(); ++i)
    EXPECT_LT(first_point(sources[i - 1]), first_point(sources[i])) << what << ": sources out of Morton order at " << i;
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

TEST(TwigGraph, PlummerTreeHasLeafGroups) {
  // The case the decomposition must get right: parents with both leaf and internal children get
  // a leaf group, a source, that their own task waits for with the internal children.
  const auto tree = ct::build_octree(ct::generate_plummer(20000, 9), ct::build_options{8, 21});
  const auto tg = ct::make_twig_graph(tree);
  std::int32_t groups = 0, internal = 0;
  for (const ct::twig_task& t : tg.tasks) groups += t.is_leaf_group() ? 1 : 0;
  for (std::int32_t n = 0; n < tree.node_count(); ++n) internal += tree.child_count[n] > 0 ? 1 : 0;
  EXPECT_GT(groups, 0);
  EXPECT_GT(tg.twig_count, 0);
  EXPECT_EQ(tg.graph.task_count(), internal + groups);  // no task per leaf
  std::size_t g = 0;
  while (g < tg.tasks.size() && !tg.tasks[g].is_leaf_group()) ++g;
  ASSERT_LT(g, tg.tasks.size());
  ASSERT_GT(g, 0u);
  const ct::twig_task& node_task = tg.tasks[g - 1];  // the group follows its node's task
  EXPECT_EQ(node_task.node(), tg.tasks[g].node());
  std::int32_t internal_children = 0;
  for (std::int32_t c = 0; c < node_task.child_count; ++c) internal_children += (tg.tasks[g].leaf_mask >> c) & 1 ? 0 : 1;
  EXPECT_EQ(tg.graph.dependency_count()[g - 1], internal_children + 1);
  EXPECT_EQ(tg.graph.dependency_count()[g], 0);
}

}  // namespace
