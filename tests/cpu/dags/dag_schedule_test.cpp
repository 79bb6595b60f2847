// SPDX-License-Identifier: Apache-2.0
// General DAGs (several dependencies and several dependents per task) on the CPU backend, every
// mode, against the serial topological execution. Oracle: trees::reference_dag_accumulate, which
// shares nothing with the scheduler but the formula (dag_accumulate.hpp).
#include <gtest/gtest.h>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "canopy/cpu_scheduler.hpp"
#include "canopy/mode.hpp"
#include "canopy/task_graph.hpp"
#include "canopy/dags/dag_accumulate.hpp"
#include "canopy/dags/dag_io.hpp"
#include "random_dag.hpp"

namespace {

using canopy::test::dag_shape;

std::vector<std::uint64_t> run_cpu(const canopy::task_graph& g, const std::vector<std::int64_t>& weights,
                                   canopy::scheduler_options options) {
  canopy::cpu_scheduler sched(g, options);
  std::vector<std::uint64_t> values(static_cast<std::size_t>(g.task_count()), 0);
  const canopy::trees::dag_accumulate_ops ops{g.pred_offsets().data(), g.predecessors().data(), weights.data(), values.data()};
  const auto r = sched.run(ops);
  EXPECT_TRUE(r.ok()) << canopy::to_string(r.code) << ": " << r.message;
  return values;
}

class dag_every_mode : public ::testing::TestWithParam<canopy::mode> {};

// Sizes {0, 1, odd, large}; three seeds; wide, deep and random shapes; 1 to 4 workers.
TEST_P(dag_every_mode, random_dags_equal_the_topological_reference) {
  for (const dag_shape shape : {dag_shape::wide, dag_shape::deep, dag_shape::random})
    for (const std::int32_t n : {0, 1, 2, 7, 333, 6001, 40001})
      for (const std::uint32_t seed : {1u, 2u, 3u}) {
        SCOPED_TRACE(to_string(shape) + " n=" + std::to_string(n) + " seed=" + std::to_string(seed));
        const auto d = canopy::test::make_random_dag(n, shape, seed);
        const auto g = canopy::task_graph::from_edges(d.task_count, d.edges);
        canopy::scheduler_options o;
        o.mode = GetParam();
        o.blocks = 1 + static_cast<int>(seed);
        const auto expected = canopy::trees::reference_dag_accumulate(g, d.weights);
        EXPECT_EQ(run_cpu(g, d.weights, o), expected);
      }
}

// The same graph run twice: the counters reset by their last user are right for the second run.
TEST_P(dag_every_mode, consecutive_runs_agree) {
  const auto d = canopy::test::make_random_dag(2001, dag_shape::random, 9);
  const auto g = canopy::task_graph::from_edges(d.task_count, d.edges);
  canopy::scheduler_options o;
  o.mode = GetParam();
  o.blocks = 3;
  canopy::cpu_scheduler sched(g, o);
  const auto expected = canopy::trees::reference_dag_accumulate(g, d.weights);
  for (int run = 0; run < 3; ++run) {
    std::vector<std::uint64_t> values(expected.size(), 0);
    const canopy::trees::dag_accumulate_ops ops{g.pred_offsets().data(), g.predecessors().data(), d.weights.data(), values.data()};
    ASSERT_TRUE(sched.run(ops).ok()) << "run " << run;
    EXPECT_EQ(values, expected) << "run " << run;
  }
}

INSTANTIATE_TEST_SUITE_P(cpu, dag_every_mode, ::testing::ValuesIn(canopy::all_modes),
                         [](const auto& info) {
                           std::string name(canopy::to_string(info.param));
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// A hand-checked diamond: a -> {b, c} -> d, weights 0: a=1, b=c=2, d=1+2+2=5.
TEST(dag_accumulate, diamond_by_hand) {
  const std::vector<std::pair<canopy::task_id, canopy::task_id>> edges{{0, 1}, {0, 2}, {1, 3}, {2, 3}};
  const auto g = canopy::task_graph::from_edges(4, edges);
  EXPECT_EQ(canopy::trees::reference_dag_accumulate(g, std::vector<std::int64_t>(4, 0)),
            (std::vector<std::uint64_t>{1, 2, 2, 5}));
  EXPECT_THROW(canopy::trees::reference_dag_accumulate(g, std::vector<std::int64_t>(3, 0)), std::invalid_argument);
}

// --- the Boost.Graph adapter -------------------------------------------------------------------

TEST(task_graph_from_boost, adjacency_list_matches_from_edges) {
  const auto d = canopy::test::make_random_dag(500, dag_shape::random, 4);
  boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS> bg(static_cast<std::size_t>(d.task_count));
  for (const auto& [a, b] : d.edges) boost::add_edge(static_cast<std::size_t>(a), static_cast<std::size_t>(b), bg);
  const auto g = canopy::trees::task_graph_from_boost(bg);
  const auto direct = canopy::task_graph::from_edges(d.task_count, d.edges);
  EXPECT_EQ(g.task_count(), direct.task_count());
  EXPECT_EQ(g.dependency_count(), direct.dependency_count());
  EXPECT_EQ(canopy::trees::reference_dag_accumulate(g, d.weights), canopy::trees::reference_dag_accumulate(direct, d.weights));
}

TEST(task_graph_from_boost, compressed_sparse_row_graph) {
  const auto d = canopy::test::make_random_dag(300, dag_shape::wide, 5);
  std::vector<std::pair<std::size_t, std::size_t>> edges(d.edges.begin(), d.edges.end());
  std::sort(edges.begin(), edges.end());
  using csr = boost::compressed_sparse_row_graph<boost::directedS>;
  const csr bg(boost::edges_are_sorted, edges.begin(), edges.end(), static_cast<std::size_t>(d.task_count));
  const auto g = canopy::trees::task_graph_from_boost(bg);
  const auto direct = canopy::task_graph::from_edges(d.task_count, d.edges);
  EXPECT_EQ(g.dependency_count(), direct.dependency_count());
  EXPECT_EQ(canopy::trees::reference_dag_accumulate(g, d.weights), canopy::trees::reference_dag_accumulate(direct, d.weights));
}

TEST(task_graph_from_boost, cycle_is_an_invalid_argument) {
  boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS> bg(3);
  boost::add_edge(0, 1, bg);
  boost::add_edge(1, 2, bg);
  boost::add_edge(2, 0, bg);
  try {
    (void)canopy::trees::task_graph_from_boost(bg);
    FAIL() << "a cycle was accepted";
  } catch (const canopy::error& e) {
    EXPECT_EQ(e.code(), canopy::status::invalid_argument);
  }
}

}  // namespace
