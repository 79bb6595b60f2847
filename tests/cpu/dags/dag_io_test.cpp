// SPDX-License-Identifier: Apache-2.0
// The DOT reader: round trips through boost::write_graphviz, id order, weights, and every
// rejection (one typed error, one line, naming what is wrong).
#include <gtest/gtest.h>

// GCC 12 reports a false -Wmaybe-uninitialized inside Boost's adjacency_list edge iterator (its
// boost::optional) when write_graphviz walks the edges; the warning's location is in these headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/graphviz.hpp>
#pragma GCC diagnostic pop

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "canopy/status.hpp"
#include "canopy/dags/dag_accumulate.hpp"
#include "canopy/dags/dag_io.hpp"
#include "canopy/trees/errors.hpp"
#include "random_dag.hpp"

namespace {

namespace trees = canopy::trees;
using canopy::test::dag_shape;

// Writes a random DAG the way another program would: boost::write_graphviz, node names "n<id>",
// a `weight` per node and an unrelated attribute the reader must ignore.
std::string to_dot(const canopy::test::random_dag& d) {
  struct vertex {
    std::string name;
    std::int64_t weight;
    std::string color = "grey";
  };
  boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, vertex> g(static_cast<std::size_t>(d.task_count));
  for (std::int32_t t = 0; t < d.task_count; ++t) g[static_cast<std::size_t>(t)] = {"n" + std::to_string(t), d.weights[static_cast<std::size_t>(t)]};
  for (const auto& [a, b] : d.edges) boost::add_edge(static_cast<std::size_t>(a), static_cast<std::size_t>(b), g);
  boost::dynamic_properties dp;
  dp.property("node_id", boost::get(&vertex::name, g));
  dp.property("weight", boost::get(&vertex::weight, g));
  dp.property("color", boost::get(&vertex::color, g));
  std::ostringstream out;
  boost::write_graphviz_dp(out, g, dp);
  return out.str();
}

TEST(dag_dot, round_trip_keeps_edges_weights_and_values) {
  for (const dag_shape shape : {dag_shape::wide, dag_shape::deep, dag_shape::random})
    for (const std::int32_t n : {1, 2, 9, 777}) {
      SCOPED_TRACE(to_string(shape) + " n=" + std::to_string(n));
      const auto d = canopy::test::make_random_dag(n, shape, 11);
      const auto parsed = trees::parse_dag_dot(to_dot(d));
      ASSERT_EQ(parsed.graph.task_count(), n);
      // Names are not numeric, so ids follow the names' byte order: map them back through "n<id>".
      std::vector<std::int32_t> original(static_cast<std::size_t>(n));
      for (std::int32_t t = 0; t < n; ++t) original[static_cast<std::size_t>(t)] = std::stoi(parsed.names[static_cast<std::size_t>(t)].substr(1));
      std::vector<std::pair<canopy::task_id, canopy::task_id>> edges;
      const auto& off = parsed.graph.pred_offsets();
      for (std::int32_t t = 0; t < n; ++t)
        for (std::int32_t i = off[static_cast<std::size_t>(t)]; i < off[static_cast<std::size_t>(t) + 1]; ++i)
          edges.emplace_back(original[static_cast<std::size_t>(parsed.graph.predecessors()[static_cast<std::size_t>(i)])],
                             original[static_cast<std::size_t>(t)]);
      auto expected_edges = d.edges;
      std::sort(edges.begin(), edges.end());
      std::sort(expected_edges.begin(), expected_edges.end());
      EXPECT_EQ(edges, expected_edges);
      const auto values = trees::reference_dag_accumulate(parsed.graph, parsed.weights);
      const auto expected = trees::reference_dag_accumulate(canopy::task_graph::from_edges(n, d.edges), d.weights);
      for (std::int32_t t = 0; t < n; ++t) {
        EXPECT_EQ(parsed.weights[static_cast<std::size_t>(t)], d.weights[static_cast<std::size_t>(original[static_cast<std::size_t>(t)])]);
        EXPECT_EQ(values[static_cast<std::size_t>(t)], expected[static_cast<std::size_t>(original[static_cast<std::size_t>(t)])]);
      }
    }
}

TEST(dag_dot, numeric_names_are_their_own_ids) {
  const auto d = trees::parse_dag_dot("digraph { 10 -> 2; 2 -> 0; 1; 0 -> 3 }");
  EXPECT_EQ(d.names, (std::vector<std::string>{"0", "1", "2", "3", "10"}));
  EXPECT_EQ(d.graph.dependency_count(), (std::vector<std::int32_t>{1, 0, 1, 1, 0}));
}

TEST(dag_dot, other_names_in_byte_order_and_weights) {
  const auto d = trees::parse_dag_dot("digraph g { b -> a [weight=7]; c [weight=-3, label=\"x\"]; a [weight=40] }");
  EXPECT_EQ(d.names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(d.weights, (std::vector<std::int64_t>{40, 0, -3}));  // the edge's weight is not a node's
  EXPECT_EQ(trees::reference_dag_accumulate(d.graph, d.weights), (std::vector<std::uint64_t>{42, 1, static_cast<std::uint64_t>(-2)}));
}

TEST(dag_dot, empty_graph_is_empty) {
  EXPECT_EQ(trees::read_dag_dot("digraph {}").task_count(), 0);
  std::istringstream in("digraph empty { }");
  EXPECT_EQ(trees::read_dag_dot(in).task_count(), 0);
}

TEST(dag_dot, example_file_is_a_diamond) {
  const auto d = trees::load_dag_dot(CANOPY_EXAMPLE_DAG);
  EXPECT_GE(d.graph.task_count(), 20);
  EXPECT_EQ(d.graph.sources().size(), 1u);
  EXPECT_EQ(d.graph.sink_count(), 1);
  EXPECT_EQ(trees::read_dag_dot_file(CANOPY_EXAMPLE_DAG).task_count(), d.graph.task_count());
}

// --- rejections --------------------------------------------------------------------------------

std::string input_error_of(const std::string& text) {
  try {
    (void)trees::read_dag_dot(text);
  } catch (const trees::input_error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << text;
  return {};
}

TEST(dag_dot, malformed_text_is_an_input_error_with_what_boost_said) {
  for (const char* text : {"", "hello", "digraph {", "digraph { a -> }", "digraph { a -> b", "digraph { a [weight= }",
                           "digraph { \"unterminated -> b }"}) {
    const auto what = input_error_of(text);
    EXPECT_NE(what.find("malformed DOT: "), std::string::npos) << text << " -> " << what;
  }
}

// 30,000 nested braces overflowed the parser's stack (SIGSEGV) before the bound: now a typed error
// at the first brace past it, whatever the nesting is made of; braces in quoted names do not count.
TEST(dag_dot, deep_nesting_is_an_input_error_not_a_stack_overflow) {
  for (const std::string open : {"{", "[", "subgraph {"}) {
    std::string text = "digraph { a -> b ";
    for (int i = 0; i < 30000; ++i) text += open;
    const auto what = input_error_of(text);
    EXPECT_NE(what.find("nested deeper than " + std::to_string(trees::max_dot_nesting) + " levels"), std::string::npos)
        << open << ": " << what;
  }
  std::string deep_name = "digraph { \"";
  for (int i = 0; i < 1000; ++i) deep_name += "{";
  deep_name += "\" -> b }";
  EXPECT_EQ(trees::parse_dag_dot(deep_name).graph.task_count(), 2);
  std::string at_bound = "digraph { a -> b ";
  for (int i = 1; i < trees::max_dot_nesting; ++i) at_bound += "subgraph { ";
  for (int i = 1; i < trees::max_dot_nesting; ++i) at_bound += "} ";
  at_bound += "}";
  EXPECT_EQ(trees::parse_dag_dot(at_bound).graph.task_count(), 2);
}

TEST(dag_dot, other_bad_input) {
  EXPECT_NE(input_error_of("graph { a -- b }").find("digraph"), std::string::npos);
  EXPECT_NE(input_error_of("digraph { a [weight=1.5] }").find("weight '1.5'"), std::string::npos);
  EXPECT_NE(input_error_of("digraph { a [weight=99999999999999999999] }").find("64-bit"), std::string::npos);
  EXPECT_NE(input_error_of("digraph { a -> b; a -> b }").find("duplicate edge a -> b"), std::string::npos);
}

trees::graph_error cycle_of(const std::string& text) {
  try {
    (void)trees::read_dag_dot(text);
  } catch (const trees::graph_error& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << text;
  return trees::graph_error(trees::graph_error::kind::cycle, {}, "");
}

TEST(dag_dot, cycle_names_its_nodes) {
  const auto e = cycle_of("digraph { start -> x; x -> y; y -> z; z -> x; z -> end }");
  EXPECT_EQ(e.problem(), trees::graph_error::kind::cycle);
  EXPECT_NE(std::string(e.what()).find("cycle x -> y -> z -> x"), std::string::npos) << e.what();
  // nodes() are task ids: names in byte order are end, start, x, y, z.
  EXPECT_EQ(e.nodes(), (std::vector<std::size_t>{2, 3, 4}));
}

TEST(dag_dot, self_loop_is_a_cycle) {
  const auto e = cycle_of("digraph { a -> b; b -> b }");
  EXPECT_EQ(e.nodes(), (std::vector<std::size_t>{1}));
  EXPECT_NE(std::string(e.what()).find("cycle b -> b"), std::string::npos) << e.what();
}

TEST(dag_dot, unreadable_file_is_an_input_error) {
  EXPECT_THROW((void)trees::load_dag_dot("/nonexistent/canopy.dot"), trees::input_error);
  EXPECT_THROW((void)trees::load_dag_dot("/"), trees::input_error);
}

}  // namespace
