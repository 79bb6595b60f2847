// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "canopy/task_graph.hpp"
#include "scheduler_test_graphs.hpp"

namespace {
using canopy::no_task;
using canopy::task_id;

TEST(TaskGraph, TreeSourcesSinksAndCounts) {
  // 0 <- 1, 2 ; 1 <- 3, 4
  const std::vector<task_id> parent = {no_task, 0, 0, 1, 1};
  const auto g = canopy::task_graph::from_parents(parent);
  EXPECT_TRUE(g.is_tree());
  EXPECT_EQ(g.sink_count(), 1);
  EXPECT_EQ(g.dependency_count(), (std::vector<std::int32_t>{2, 2, 0, 0, 0}));
  EXPECT_EQ(g.sources(), (std::vector<task_id>{2, 3, 4}));
}

TEST(TaskGraph, SourcesOrderMustBeAPermutationOfTheLeaves) {
  const std::vector<task_id> parent = {no_task, 0, 0, 1, 1};
  const std::vector<task_id> order = {3, 4, 2};
  EXPECT_EQ(canopy::task_graph::from_parents(parent, order).sources(), order);
  const std::vector<task_id> wrong = {3, 4, 1};
  EXPECT_THROW(canopy::task_graph::from_parents(parent, wrong), canopy::error);
}

TEST(TaskGraph, RejectsBadParents) {
  EXPECT_THROW(canopy::task_graph::from_parents(std::vector<task_id>{no_task, 5}), canopy::error);
  EXPECT_THROW(canopy::task_graph::from_parents(std::vector<task_id>{0}), canopy::error);
  try {
    canopy::task_graph::from_parents(std::vector<task_id>{no_task, 2, 3, 1});
    FAIL() << "a parent cycle must be rejected";
  } catch (const canopy::error& e) {
    EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
  }
}

TEST(TaskGraph, DagCycleIsReportedWithItsTasks) {
  const std::vector<std::pair<task_id, task_id>> edges = {{0, 1}, {1, 2}, {2, 3}, {3, 1}, {0, 4}};
  try {
    canopy::task_graph::from_edges(5, edges);
    FAIL() << "expected a cycle error";
  } catch (const canopy::error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cycle"), std::string::npos);
    for (const char* t : {"1", "2", "3"}) EXPECT_NE(what.find(t), std::string::npos) << what;
    EXPECT_EQ(e.code(), canopy::status::invalid_argument);
  }
}

TEST(TaskGraph, RejectsBadEdges) {
  EXPECT_THROW(canopy::task_graph::from_edges(3, std::vector<std::pair<task_id, task_id>>{{0, 3}}), canopy::error);
  EXPECT_THROW(canopy::task_graph::from_edges(3, std::vector<std::pair<task_id, task_id>>{{1, 1}}), canopy::error);
  EXPECT_THROW(canopy::task_graph::from_edges(3, std::vector<std::pair<task_id, task_id>>{{0, 1}, {0, 1}}), canopy::error);
}

TEST(TaskGraph, DagCountsAndPredecessors) {
  const auto edges = canopy::testing::random_dag_edges(500, 3, 7);
  const auto g = canopy::task_graph::from_edges(500, edges);
  EXPECT_FALSE(g.is_tree());
  std::size_t total = 0;
  for (auto c : g.dependency_count()) total += static_cast<std::size_t>(c);
  EXPECT_EQ(total, edges.size());
  EXPECT_EQ(g.predecessors().size(), edges.size());
}

TEST(TaskGraph, StuckTaskIsTheFirstPartiallyReachedOne) {
  const std::vector<task_id> parent = {no_task, 0, 0, 1, 1};
  auto g = canopy::task_graph::from_parents(parent);
  g.withhold_dependency(1);
  // After 3 and 4 finished: task 1 waits for its phantom dependency (1 of 3 left), task 0 got
  // task 2's arrival only.
  std::vector<std::int32_t> pending = {1, 1, 0, 0, 0};
  EXPECT_EQ(g.find_stuck_task(pending), 1);
}

}  // namespace
