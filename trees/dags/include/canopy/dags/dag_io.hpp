// SPDX-License-Identifier: Apache-2.0
// General dependency DAGs from Boost.Graph graphs and Graphviz DOT files, as canopy::task_graph.
// Host only: include from .cpp files, never from .cu (Boost costs seconds per nvcc unit).
//
// Direction: an edge u -> v means "v depends on u" (v can run once u is done), the same as the
// octree export of task_graph.hpp (child -> parent) and canopy::task_graph::from_edges.
//
// Task ids of a DOT file: when every node name is a non-negative decimal integer (`0`, `17`), the
// tasks are ordered by that number, so a file naming its nodes 0..n-1 keeps its ids; otherwise
// they are ordered by name (byte order). dot_dag::names maps a task id back to its DOT name.
// Node attribute `weight` (a 64-bit integer, default 0) is read; all other attributes are ignored.
#pragma once

#include <canopy/task_graph.hpp>
#include <canopy/trees/errors.hpp>

#include <boost/graph/graph_traits.hpp>
#include <boost/graph/properties.hpp>

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace canopy::trees {

/// The deepest nesting of `{` and `[` a DOT input may have (outside quoted strings): Boost's
/// parser recurses into each, and a deeper input is refused before it can overflow the stack.
inline constexpr int max_dot_nesting = 256;

/// The largest DOT input read, in bytes (64 MiB): Boost's parser holds the text, its tokens and a
/// property graph at once, about 45 times the file's size at its peak (a 74 MB file took 3.1 GB),
/// so the bound keeps the worst case near 3 GB; a larger input (or /dev/zero, or a /proc file that
/// never ends) is an input_error before it can exhaust memory.
inline constexpr std::uint64_t max_dot_bytes = std::uint64_t{64} << 20;

/// A DAG read from DOT: the schedulable graph plus what the file said about each task.
struct dot_dag {
  canopy::task_graph graph;
  std::vector<std::string> names;     ///< names[t]: the DOT node name of task t
  std::vector<std::int64_t> weights;  ///< weights[t]: the node's `weight` attribute, 0 if absent
};

/// Parses DOT text. `source` names the input in error messages (a path, or "DOT input").
/// Throws input_error ("<source>: <problem>", one line, with what Boost said) for malformed DOT,
/// an undirected graph, a bad weight, a duplicate edge or nesting deeper than max_dot_nesting;
/// graph_error (kind::cycle, nodes() the cycle's task ids in edge order, what() naming the DOT
/// names) for a cycle or a self-loop.
/// An empty digraph gives an empty task graph.
dot_dag parse_dag_dot(std::string_view text, const std::string& source = "DOT input");

/// parse_dag_dot of a file's contents. Also an input_error: a missing file, a directory, a file that
/// is not a regular file (a FIFO, a device: never opened) and a file of more than max_dot_bytes.
dot_dag load_dag_dot(const std::filesystem::path& path);

/// The graph alone (same rules and errors as parse_dag_dot).
canopy::task_graph read_dag_dot(std::string_view text);
canopy::task_graph read_dag_dot(std::istream& in);
canopy::task_graph read_dag_dot_file(const std::filesystem::path& path);

/// Any Boost.Graph directed graph (adjacency_list, compressed_sparse_row_graph, ...) with a vertex
/// index: vertex v becomes task get(vertex_index, g, v), edge u -> v means v depends on u.
/// Cycles, self-loops and duplicate edges are rejected by task_graph::from_edges (canopy::error,
/// status invalid_argument, naming the tasks).
template <class Graph>
canopy::task_graph task_graph_from_boost(const Graph& g) {
  using traits = boost::graph_traits<Graph>;
  static_assert(std::is_convertible_v<typename traits::directed_category, boost::directed_tag>,
                "task_graph_from_boost needs a directed graph: an edge u -> v means v depends on u");
  const auto index = get(boost::vertex_index, g);
  const auto count = num_vertices(g);
  if (count > static_cast<decltype(count)>(std::numeric_limits<std::int32_t>::max()))
    throw canopy::error(canopy::status::invalid_argument, "task_graph_from_boost: more than 2^31-1 vertices");
  std::vector<std::pair<canopy::task_id, canopy::task_id>> dependencies;
  dependencies.reserve(num_edges(g));
  for (auto [e, end] = edges(g); e != end; ++e)
    dependencies.emplace_back(static_cast<canopy::task_id>(get(index, source(*e, g))),
                              static_cast<canopy::task_id>(get(index, target(*e, g))));
  return canopy::task_graph::from_edges(static_cast<std::int32_t>(count), dependencies);
}

}  // namespace canopy::trees
