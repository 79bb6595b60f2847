// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/generators.hpp>
#include <canopy/dags/boost_task_graph.hpp>

#include "test_support.hpp"

#include <boost/graph/graphviz.hpp>

#include <fstream>
#include <sstream>

namespace canopy::trees {
namespace {

using testing::temp_dir;

graph_error expect_graph_error(const boost_task_graph& g, graph_error::kind kind, graph_shape shape = graph_shape::tree) {
  try {
    validate_task_graph(g, shape);
  } catch (const graph_error& e) {
    EXPECT_EQ(e.problem(), kind) << e.what();
    return e;
  }
  ADD_FAILURE() << "graph accepted";
  throw std::logic_error("no graph_error");
}

TEST(TaskGraph, MirrorsTheTree) {
  const octree t = build_octree(generate_plummer(20000, 1), {8, 21});
  const boost_task_graph g = make_task_graph(t);
  ASSERT_EQ(boost::num_vertices(g), static_cast<std::size_t>(t.node_count()));
  EXPECT_EQ(boost::num_edges(g), static_cast<std::size_t>(t.node_count() - 1));
  for (std::int32_t n = 0; n < t.node_count(); ++n) {
    EXPECT_EQ(g[n].node, n);
    EXPECT_EQ(g[n].level, t.level[n]);
    EXPECT_EQ(g[n].point_count, t.point_count[n]);
    EXPECT_EQ(boost::in_degree(n, g), static_cast<std::size_t>(t.child_count[n]));  // = pending children
    EXPECT_EQ(boost::out_degree(n, g), n == 0 ? 0u : 1u);
  }
  EXPECT_NO_THROW(validate_task_graph(g));
}

TEST(TaskGraph, ValidTreesOfEveryKind) {
  EXPECT_NO_THROW(validate_task_graph(make_task_graph(build_octree({}))));
  EXPECT_NO_THROW(validate_task_graph(make_task_graph(build_octree(generate_uniform(1, 1)))));
  EXPECT_NO_THROW(validate_task_graph(make_task_graph(build_complete_octree(4, 1, 1))));
  EXPECT_NO_THROW(validate_task_graph(boost_task_graph{}));
}

TEST(TaskGraph, PlantedCycleIsReportedWithItsVertices) {
  const octree t = build_complete_octree(3, 1, 1);
  boost_task_graph g = make_task_graph(t);
  const std::int32_t leaf = t.leaves[100];
  boost::add_edge(0, static_cast<std::size_t>(leaf), g);  // root -> leaf closes leaf -> ... -> root
  const graph_error e = expect_graph_error(g, graph_error::kind::cycle);
  const auto& cycle = e.nodes();
  ASSERT_EQ(cycle.size(), 4u);  // leaf, its parent, grandparent, root
  for (std::size_t i = 0; i < cycle.size(); ++i) {
    EXPECT_TRUE(boost::edge(cycle[i], cycle[(i + 1) % cycle.size()], g).second) << "no edge " << cycle[i];
  }
  EXPECT_NE(std::find(cycle.begin(), cycle.end(), 0u), cycle.end());
  EXPECT_NE(std::find(cycle.begin(), cycle.end(), static_cast<std::size_t>(leaf)), cycle.end());
  EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos);
  // Also a cycle for a general DAG.
  expect_graph_error(g, graph_error::kind::cycle, graph_shape::dag);
}

TEST(TaskGraph, SelfLoopIsACycle) {
  boost_task_graph g = make_task_graph(build_complete_octree(1, 1, 1));
  boost::add_edge(3, 3, g);
  const graph_error e = expect_graph_error(g, graph_error::kind::cycle);
  EXPECT_EQ(e.nodes(), std::vector<std::size_t>{3});
}

TEST(TaskGraph, PlantedSecondParentIsReported) {
  const octree t = build_complete_octree(2, 1, 1);
  boost_task_graph g = make_task_graph(t);
  const std::size_t child = static_cast<std::size_t>(t.level_offset[2]);  // first leaf, parent 1
  boost::add_edge(child, 2, g);                                            // a second parent, no cycle
  const graph_error e = expect_graph_error(g, graph_error::kind::multiple_parents);
  EXPECT_EQ(e.nodes(), (std::vector<std::size_t>{child, 1, 2}));
  EXPECT_NE(std::string(e.what()).find("2 parents"), std::string::npos) << e.what();
  // The same graph is a valid general DAG.
  EXPECT_NO_THROW(validate_task_graph(g, graph_shape::dag));
}

TEST(TaskGraph, DetachedSubtreeIsASecondRoot) {
  const octree t = build_complete_octree(2, 1, 1);
  boost_task_graph g = make_task_graph(t);
  boost::remove_edge(3, 0, g);  // node 3's subtree no longer reaches the root
  const graph_error e = expect_graph_error(g, graph_error::kind::multiple_roots);
  EXPECT_EQ(e.nodes(), (std::vector<std::size_t>{0, 3}));
}

TEST(TaskGraph, WritesDot) {
  temp_dir dir;
  const octree t = build_octree(generate_clusters(3000, 2), {16, 21});
  write_dot(t, dir / "tree.dot");
  EXPECT_EQ(dir.files(), std::vector<std::string>{"tree.dot"});
  std::ifstream in(dir / "tree.dot");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("digraph"), std::string::npos);
  EXPECT_NE(text.find("rankdir=BT"), std::string::npos);
  std::size_t arrows = 0;
  for (std::size_t p = text.find("->"); p != std::string::npos; p = text.find("->", p + 2)) ++arrows;
  EXPECT_EQ(arrows, static_cast<std::size_t>(t.node_count() - 1));
  // Boost reads it back as the same graph.
  boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS> back;
  boost::dynamic_properties dp(boost::ignore_other_properties);
  std::ifstream again(dir / "tree.dot");
  ASSERT_TRUE(boost::read_graphviz(again, back, dp));
  EXPECT_EQ(boost::num_vertices(back), static_cast<std::size_t>(t.node_count()));
  EXPECT_EQ(boost::num_edges(back), static_cast<std::size_t>(t.node_count() - 1));
}

TEST(TaskGraph, DotWriteFailureLeavesNothing) {
  temp_dir dir;
  EXPECT_THROW(write_dot(build_complete_octree(1, 1, 1), dir / "missing" / "t.dot"), std::filesystem::filesystem_error);
  EXPECT_TRUE(dir.files().empty());
}

}  // namespace
}  // namespace canopy::trees
