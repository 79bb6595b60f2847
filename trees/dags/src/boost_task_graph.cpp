// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/errors.hpp>
#include <canopy/dags/boost_task_graph.hpp>

#include <canopy/trees/atomic_file.hpp>

#include <boost/graph/depth_first_search.hpp>
#include <boost/graph/graphviz.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace canopy::trees {

boost_task_graph make_task_graph(const octree& tree) {
  const std::size_t nodes = static_cast<std::size_t>(tree.node_count());
  boost_task_graph g(nodes);
  for (std::size_t v = 0; v < nodes; ++v) {
    g[v] = task_vertex{static_cast<std::int32_t>(v), tree.level[v], tree.point_count[v]};
    if (tree.parent[v] >= 0) boost::add_edge(v, static_cast<std::size_t>(tree.parent[v]), g);
  }
  return g;
}

namespace {

using vertex = boost_task_graph::vertex_descriptor;
using edge = boost_task_graph::edge_descriptor;

std::string list(const std::vector<std::size_t>& vs, const char* separator) {
  std::string s;
  // At most 16 (a 100,000-node cycle is one line of a message, not megabytes).
  for (std::size_t i = 0; i < vs.size() && i < 16; ++i) s += (i ? separator : "") + std::to_string(vs[i]);
  if (vs.size() > 16) s += std::string(separator) + "... (" + std::to_string(vs.size()) + ")";
  return s;
}

// A back edge in a depth-first search closes a cycle: its target is a grey ancestor of its source,
// so the cycle is the tree path target -> ... -> source followed by the back edge.
struct found_cycle {
  std::vector<std::size_t> cycle;
};
class cycle_recorder : public boost::default_dfs_visitor {
 public:
  explicit cycle_recorder(std::vector<vertex>& predecessor) : predecessor_(&predecessor) {}
  void tree_edge(edge e, const boost_task_graph& g) { (*predecessor_)[boost::target(e, g)] = boost::source(e, g); }
  void back_edge(edge e, const boost_task_graph& g) {
    const vertex from = boost::source(e, g), to = boost::target(e, g);
    found_cycle found;
    for (vertex v = from; v != to; v = (*predecessor_)[v]) found.cycle.push_back(v);
    found.cycle.push_back(to);
    std::reverse(found.cycle.begin(), found.cycle.end());
    throw found;  // the usual way to stop boost::depth_first_search early
  }

 private:
  std::vector<vertex>* predecessor_;  // visitors are copied by value; the map must be shared
};

}  // namespace

void validate_task_graph(const boost_task_graph& g, graph_shape shape) {
  const std::size_t count = boost::num_vertices(g);
  if (count == 0) return;

  std::vector<vertex> predecessor(count);
  try {
    boost::depth_first_search(g, boost::visitor(cycle_recorder(predecessor)));
  } catch (const found_cycle& found) {
    std::vector<std::size_t> closed = found.cycle;
    closed.push_back(found.cycle.front());
    throw graph_error(graph_error::kind::cycle, found.cycle, "cycle " + list(closed, " -> "));
  }
  if (shape == graph_shape::dag) return;

  std::vector<std::size_t> roots;
  for (vertex v = 0; v < count; ++v) {
    const std::size_t parents = boost::out_degree(v, g);
    if (parents == 0) roots.push_back(v);
    if (parents > 1) {
      std::vector<std::size_t> involved{v};
      for (const edge e : boost::make_iterator_range(boost::out_edges(v, g))) involved.push_back(boost::target(e, g));
      throw graph_error(graph_error::kind::multiple_parents, involved,
                        "vertex " + std::to_string(v) + " has " + std::to_string(parents) +
                            " parents: " + list({involved.begin() + 1, involved.end()}, ", "));
    }
  }
  // Acyclic and non-empty, so at least one root exists.
  if (roots.size() > 1) {
    throw graph_error(graph_error::kind::multiple_roots, roots,
                      std::to_string(roots.size()) + " roots (" + list(roots, ", ") +
                          "): the vertices under all but one do not reach the root");
  }
}

void write_dot(const boost_task_graph& g, const std::filesystem::path& path) {
  write_file_atomically(path, [&](std::ostream& out) {
    boost::write_graphviz(
        out, g,
        [&g](std::ostream& os, vertex v) {
          os << "[label=\"" << g[v].node << "\\nL" << g[v].level << " n=" << g[v].point_count << "\"]";
        },
        boost::default_writer(),
        // Edges point child -> parent; rank from the bottom so the root is drawn on top.
        [](std::ostream& os) { os << "rankdir=BT;\n"; });
  });
}

void write_dot(const octree& tree, const std::filesystem::path& path) { write_dot(make_task_graph(tree), path); }

}  // namespace canopy::trees
