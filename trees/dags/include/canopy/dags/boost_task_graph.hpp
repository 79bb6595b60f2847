// SPDX-License-Identifier: Apache-2.0
// Dependencies as a Boost.Graph graph (an octree's, or a general DAG's), for
// validation and Graphviz export. Named boost_task_graph to tell it from canopy::task_graph, the
// scheduler's own graph (canopy/task_graph.hpp), which the DAG readers of dag_io.hpp return.
// Host only: include from .cpp files, never from .cu (Boost costs seconds per nvcc unit).
//
// One vertex per tree node (vertex i = node i), one edge child -> parent: an edge u -> v means
// "v can run once u is done". bidirectionalS so that in_degree(v) is v's number of children,
// which is exactly the initial pending-children counter of v.
#pragma once

#include <canopy/trees/octree.hpp>

#include <boost/graph/adjacency_list.hpp>

#include <cstdint>
#include <filesystem>

namespace canopy::trees {

struct task_vertex {
  std::int32_t node = -1;  // tree node id (== vertex index for graphs from make_task_graph)
  std::int32_t level = 0;
  std::int32_t point_count = 0;
};

using boost_task_graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, task_vertex>;

boost_task_graph make_task_graph(const octree& tree);

// tree: acyclic, at most one parent (out-edge) per vertex, exactly one root (vertex without a
//       parent). Together these mean every vertex reaches the root (following the unique parent
//       from any vertex cannot cycle, so it ends at a root, and there is only one) and every vertex
//       is reachable from a leaf (walking children backwards in a finite DAG ends at a leaf).
// dag:  acyclic only (a general dependency DAG may join and fork; every vertex is still reachable
//       from a source and reaches a sink).
enum class graph_shape { tree, dag };

// Throws graph_error, checking in this order: kind::cycle with the cycle's vertices in edge order
// (from the back edge a depth-first search meets), kind::multiple_parents with the vertex then its
// parents, kind::multiple_roots with the roots. An empty graph is valid.
void validate_task_graph(const boost_task_graph& graph, graph_shape shape = graph_shape::tree);

// Graphviz DOT (boost::write_graphviz), one vertex per node labelled "node/level/points", edges
// child -> parent. Written to a temporary file and renamed; throws std::filesystem::filesystem_error.
void write_dot(const boost_task_graph& graph, const std::filesystem::path& path);
void write_dot(const octree& tree, const std::filesystem::path& path);

}  // namespace canopy::trees
