// SPDX-License-Identifier: Apache-2.0
// The bucket decomposition (canopy/passes/bucket_pass.hpp): every node computed exactly once, each
// bucket a run of whole small sibling subtrees within its point budget, its internal nodes in waves
// whose children come earlier, the graph's shape and source order, and the serial operation (the
// CPU backend's) against the double reference.
#include <canopy/cpu_scheduler.hpp>
#include <canopy/passes/bucket_pass.hpp>
#include <canopy/passes/upward_runner.hpp>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/reference.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "bucket_test_trees.hpp"

namespace {
namespace ct = canopy::trees;

void expect_well_formed(const ct::octree& tree, const ct::bucket_graph& bg, int budget, const std::string& what) {
  const auto nodes = static_cast<std::size_t>(tree.node_count());
  const std::vector<std::int32_t>& blob = bg.blob;
  const std::int32_t tasks = bg.graph.task_count();
  ASSERT_GE(blob.size(), 4u * static_cast<std::size_t>(tasks)) << what;
  std::vector<int> computed(nodes, 0);
  std::vector<int> wave_of(nodes, -1);  // 0 for a bucket's leaves, w for its w-th wave
  std::vector<std::int32_t> task_of_big(nodes, -1);
  std::int32_t buckets = 0, bigs = 0;
  for (std::int32_t t = 0; t < tasks; ++t) {
    const std::int32_t* rec = &blob[4 * static_cast<std::size_t>(t)];
    const canopy::task_id parent = bg.graph.parent()[static_cast<std::size_t>(t)];
    if (rec[0] >= 0) {  // a big node
      const std::int32_t n = rec[0];
      ++bigs;
      EXPECT_GT(tree.point_count[n], budget) << what << ": node " << n << " is small but a task of its own";
      EXPECT_EQ(rec[1], tree.first_child[n]) << what;
      EXPECT_EQ(rec[2], tree.child_count[n]) << what;
      ++computed[static_cast<std::size_t>(n)];
      task_of_big[static_cast<std::size_t>(n)] = t;
      if (tree.parent[n] < 0) EXPECT_EQ(parent, canopy::no_task) << what;
      else EXPECT_EQ(parent, task_of_big[static_cast<std::size_t>(tree.parent[n])]) << what << ": node " << n;
      continue;
    }
    ++buckets;
    const std::int32_t begin = ~rec[0], end = rec[1], list = rec[2], list_end = rec[3];
    EXPECT_LE(end - begin, budget) << what << ": bucket " << t;
    ASSERT_LE(static_cast<std::size_t>(list_end), blob.size()) << what;
    const std::int32_t leaves = blob[static_cast<std::size_t>(list)];
    ASSERT_GE(leaves, 1) << what;
    // Its leaves tile [begin, end) in Morton order.
    std::int32_t next = begin;
    for (std::int32_t i = 0; i < leaves; ++i) {
      const std::int32_t leaf = blob[static_cast<std::size_t>(list + 1 + 2 * i)];
      ASSERT_EQ(tree.child_count[leaf], 0) << what << ": bucket " << t << " lists an internal node as a leaf";
      EXPECT_EQ(tree.point_begin[leaf], next) << what << ": bucket " << t << " leaf " << i;
      // The record carries the leaf's first point from the bucket's, and the next record (or the
      // closing count) where it ends.
      EXPECT_EQ(blob[static_cast<std::size_t>(list + 2 + 2 * i)], tree.point_begin[leaf] - begin) << what;
      EXPECT_EQ(blob[static_cast<std::size_t>(list + 4 + 2 * i)] - blob[static_cast<std::size_t>(list + 2 + 2 * i)],
                tree.point_count[leaf])
          << what;
      next = tree.point_begin[leaf] + tree.point_count[leaf];
      ++computed[static_cast<std::size_t>(leaf)];
      wave_of[static_cast<std::size_t>(leaf)] = 0;
    }
    EXPECT_EQ(next, end) << what << ": bucket " << t;
    // Its waves: each node's children are in the same bucket, on an earlier wave.
    int w = 0;
    std::int32_t top = -1;  // the bucket's subtree roots share a parent: the task it waits for
    EXPECT_EQ(blob[static_cast<std::size_t>(list + 2 + 2 * leaves)], end - begin) << what;
    for (std::int32_t pos = list + 3 + 2 * leaves; pos < list_end;) {
      const std::int32_t count = blob[static_cast<std::size_t>(pos)];
      ASSERT_GE(count, 1) << what;
      ++w;
      for (std::int32_t i = 0; i < count; ++i) {
        const std::int32_t n = blob[static_cast<std::size_t>(pos + 1 + 3 * i)];
        ASSERT_GT(tree.child_count[n], 0) << what << ": a wave lists leaf " << n;
        EXPECT_EQ(blob[static_cast<std::size_t>(pos + 2 + 3 * i)], tree.first_child[n]) << what;
        EXPECT_EQ(blob[static_cast<std::size_t>(pos + 3 + 3 * i)], tree.child_count[n]) << what;
        for (std::int32_t c = tree.first_child[n]; c < tree.first_child[n] + tree.child_count[n]; ++c) {
          EXPECT_GE(wave_of[static_cast<std::size_t>(c)], 0) << what << ": child " << c << " of " << n << " not earlier";
          EXPECT_LT(wave_of[static_cast<std::size_t>(c)], w) << what;
        }
        ++computed[static_cast<std::size_t>(n)];
        wave_of[static_cast<std::size_t>(n)] = w;
        top = n;
      }
      pos += 1 + 3 * count;
    }
    EXPECT_LE(w, bg.max_waves) << what;
    const std::int32_t first_leaf = blob[static_cast<std::size_t>(list + 1)];
    std::int32_t root = top >= 0 ? top : first_leaf;
    while (tree.parent[root] >= 0 && tree.point_count[tree.parent[root]] <= budget) root = tree.parent[root];
    if (tree.parent[root] < 0) EXPECT_EQ(parent, canopy::no_task) << what;
    else EXPECT_EQ(parent, task_of_big[static_cast<std::size_t>(tree.parent[root])]) << what << ": bucket " << t;
  }
  EXPECT_EQ(buckets, bg.bucket_count) << what;
  EXPECT_EQ(bigs, bg.big_count) << what;
  for (std::size_t n = 0; n < nodes; ++n) EXPECT_EQ(computed[n], 1) << what << ": node " << n;
  // The sources: the buckets and the big leaves, in Morton order (by first point).
  std::int32_t last = -1;
  for (const canopy::task_id s : bg.graph.sources()) {
    const std::int32_t* rec = &blob[4 * static_cast<std::size_t>(s)];
    const std::int32_t first = rec[0] < 0 ? ~rec[0] : tree.point_begin[rec[0]];
    if (rec[0] >= 0) {
      EXPECT_EQ(rec[2], 0) << what << ": a merge task among the sources";
    }
    EXPECT_GE(first, last) << what;
    last = first;
  }
}

std::vector<std::pair<std::string, ct::octree>> trees() { return canopy::test::bucket_test_trees(); }

TEST(bucket_pass, decomposition_is_well_formed) {
  for (const auto& [name, tree] : trees())
    for (const int budget : {1, 7, 32, 128, 129, 512, 100000}) {
      const ct::bucket_graph bg = ct::make_bucket_graph(tree, budget);
      expect_well_formed(tree, bg, budget, name + ", " + std::to_string(budget) + " points a bucket");
    }
}

TEST(bucket_pass, a_small_tree_is_one_bucket_and_a_budget_below_every_leaf_is_node_tasks) {
  const ct::octree tree = ct::build_complete_octree(2, 8, 7);
  const ct::bucket_graph one = ct::make_bucket_graph(tree, 512);
  EXPECT_EQ(one.graph.task_count(), 1);
  EXPECT_EQ(one.bucket_count, 1);
  EXPECT_EQ(one.max_waves, 2);
  const ct::bucket_graph none = ct::make_bucket_graph(tree, 7);  // every node holds 8 or more
  EXPECT_EQ(none.bucket_count, 0);
  EXPECT_EQ(none.big_count, tree.node_count());
}

TEST(bucket_pass, refuses_a_budget_below_one) {
  const ct::octree tree = ct::build_complete_octree(1, 8, 1);
  EXPECT_THROW(ct::make_bucket_graph(tree, 0), std::invalid_argument);
  EXPECT_THROW(ct::make_bucket_graph(tree, -5), std::invalid_argument);
}

TEST(bucket_pass, default_budget_grows_with_the_tree) {
  EXPECT_EQ(ct::default_bucket_points(0), 128);
  EXPECT_EQ(ct::default_bucket_points(1 << 20), 128);
  EXPECT_LE(ct::default_bucket_points(16 << 20), ct::bucket_upward_ops<float>::max_bucket_points);
  EXPECT_GT(ct::default_bucket_points(16 << 20), ct::default_bucket_points(1 << 20));
}

TEST(bucket_pass, cpu_backend_matches_the_reference) {
  for (const auto& [name, tree] : trees()) {
    const auto ref = ct::reference_upward_pass(tree);
    for (const int budget : {1, 32, 129, 100000}) {
      ct::upward_options o{ct::pass_backend::cpu, ct::pass_tasks::bucket, {}};
      o.bucket_points = budget;
      o.scheduler.blocks = 3;
      for (const canopy::mode m : {canopy::mode::mutex, canopy::mode::lockfree, canopy::mode::continuation}) {
        o.scheduler.mode = m;
        ct::upward_runner pass(tree, o);
        pass.poison();
        const canopy::run_result r = pass.run();
        ASSERT_TRUE(r.ok()) << name << ": " << r.message;
        const auto c = ct::compare_payloads<float>(tree, pass.download(), ref);
        EXPECT_TRUE(c.within_tolerance) << name << ", " << budget << ", " << canopy::to_string(m) << ": " << c.summary();
      }
    }
  }
}

}  // namespace
