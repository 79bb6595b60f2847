// SPDX-License-Identifier: Apache-2.0
// canopy dot: export an octree's task graph (child -> parent) as Graphviz DOT.
#include <filesystem>
#include <memory>
#include <string>

#include <boost/graph/adjacency_list.hpp>
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "canopy/dags/boost_task_graph.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace canopy::tool {

namespace {

struct dot_options {
  std::string file;
  tree_options tree;
  std::string output;
};

int run_dot(const dot_options& o) {
  // Fail before building a large tree, not after.
  const std::filesystem::path out = o.output;
  check_output_path(o.output, out);

  const auto loaded = load_tree(o.file, o.tree);
  stage g;
  const auto graph = canopy::trees::make_task_graph(loaded.tree);
  canopy::trees::validate_task_graph(graph, canopy::trees::graph_shape::tree);
  g.done("built and validated the task graph (acyclic, one parent per node, all reach the root)");
  if (boost::num_vertices(graph) > 10000)
    spdlog::warn("{} vertices: Graphviz lays out graphs this large very slowly (try a smaller --max-depth)",
                 grouped(static_cast<long long>(boost::num_vertices(graph))));
  stage w;
  canopy::trees::write_dot(graph, out);  // temporary file + rename: never half-written
  w.done(fmt::format("wrote {}", o.output));
  fmt::print(summary_stream(out), "wrote {} vertices and {} edges (child -> parent) to {}\n",
             grouped(static_cast<long long>(boost::num_vertices(graph))),
             grouped(static_cast<long long>(boost::num_edges(graph))), o.output);
  return exit_ok;
}

}  // namespace

command add_dot_command(CLI::App& app) {
  auto o = std::make_shared<dot_options>();
  auto* cmd = app.add_subcommand("dot", "Write an octree's task graph (an edge child -> parent: the parent can "
                                        "run once the child is done) as Graphviz DOT");
  cmd->add_option("FILE", o->file, input_help)->required();
  add_tree_options(*cmd, o->tree);
  cmd->add_option("-o,--output", o->output, "output .dot file; written to a temporary name, then renamed")->required();
  cmd->footer("Example:\n  canopy dot gen:plummer:2000 --max-leaf 64 -o tree.dot && dot -Tsvg tree.dot -o tree.svg");
  return {cmd, [o] { return run_dot(*o); }};
}

}  // namespace canopy::tool
