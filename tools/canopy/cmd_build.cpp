// SPDX-License-Identifier: Apache-2.0
// canopy build: build an octree and describe its shape.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "canopy/trees/octree.hpp"
#include "backends.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace canopy::tool {

namespace {

struct build_command_options {
  std::string file;
  tree_options tree;
  bool check = false;
  bool json = false;
  std::string on = "host";  ///< --on: also build on the GPU, checked against the host build
};

struct level_row {
  int level;
  long long nodes = 0, leaves = 0, leaf_points = 0;
};

// Leaf sizes in power-of-two bins: [0], [1], [2,3], [4,7], ... (bin b > 0 holds 2^(b-1) .. 2^b - 1);
// min and max are the sizes actually seen in the bin.
struct occupancy_bin {
  long long min = 0, max = 0, leaves = 0;
};

std::vector<occupancy_bin> occupancy_histogram(const canopy::trees::octree& t) {
  std::vector<occupancy_bin> bins;
  for (const auto leaf : t.leaves) {
    const auto n = static_cast<std::uint32_t>(t.point_count[static_cast<std::size_t>(leaf)]);
    const auto b = static_cast<std::size_t>(std::bit_width(n));  // 0 -> 0, 1 -> 1, 2..3 -> 2, ...
    if (bins.size() <= b) bins.resize(b + 1);
    auto& bin = bins[b];
    bin.min = bin.leaves ? std::min<long long>(bin.min, n) : n;
    bin.max = bin.leaves ? std::max<long long>(bin.max, n) : n;
    ++bin.leaves;
  }
  return bins;
}

int run_build(const build_command_options& o) {
  if (o.on == "gpu") require_adaptive_for_gpu_build(o.file, "--on gpu");
  auto loaded = load_tree(o.file, o.tree);
  const auto& t = loaded.tree;
  double gpu_ms = -1;
  if (o.on == "gpu") {
    // The GPU build from the same points, downloaded: it must be the host's tree node for node.
    stage s;
    const auto gpu_tree = build_octree_on_gpu(t.points, {o.tree.max_leaf, o.tree.max_depth}, &gpu_ms);
    if (const std::string d = canopy::trees::structure_difference(gpu_tree, t); !d.empty())
      throw std::runtime_error("gpu build: the tree built on the GPU differs from the host's: " + d);
    s.done("built on the GPU, the same tree as the host's");
  }
  if (o.check) {
    stage s;
    canopy::trees::check_invariants(t);
    s.done("checked the layout invariants");
  }

  std::vector<level_row> levels;
  long long max_leaf_points = 0, min_leaf_points = -1;
  for (int l = 0; l <= t.depth; ++l) {
    level_row row{l};
    for (auto n = t.level_offset[static_cast<std::size_t>(l)]; n < t.level_offset[static_cast<std::size_t>(l) + 1]; ++n) {
      ++row.nodes;
      if (t.is_leaf(n)) {
        const long long p = t.point_count[static_cast<std::size_t>(n)];
        ++row.leaves;
        row.leaf_points += p;
        max_leaf_points = std::max(max_leaf_points, p);
        min_leaf_points = min_leaf_points < 0 ? p : std::min(min_leaf_points, p);
      }
    }
    levels.push_back(row);
  }
  const auto histogram = occupancy_histogram(t);
  const auto points = static_cast<long long>(t.points.size());
  const auto leaves = static_cast<long long>(t.leaves.size());

  if (o.json) {
    nlohmann::json j;
    j["file"] = o.file;
    j["points"] = points;
    j["max_leaf"] = o.tree.max_leaf;
    j["max_depth"] = o.tree.max_depth;
    j["complete"] = loaded.complete;
    j["depth"] = t.depth;
    j["nodes"] = t.node_count();
    j["leaves"] = leaves;
    j["load_ms"] = loaded.load_ms;
    j["build_ms"] = loaded.build_ms;
    j["built_on"] = o.on;
    if (gpu_ms >= 0) j["gpu_build_ms"] = gpu_ms;
    for (const auto& r : levels)
      j["levels"].push_back({{"level", r.level}, {"nodes", r.nodes}, {"leaves", r.leaves}, {"leaf_points", r.leaf_points}});
    for (const auto& b : histogram) j["leaf_occupancy"].push_back({{"min", b.min}, {"max", b.max}, {"leaves", b.leaves}});
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return exit_ok;
  }

  fmt::print("file        {} ({} points)\n", o.file, grouped(points));
  if (loaded.complete)
    fmt::print("tree        complete octree (lattice)\n");
  else
    fmt::print("tree        adaptive octree, max leaf {}, max depth {}\n", o.tree.max_leaf, o.tree.max_depth);
  fmt::print("depth       {}\n", t.depth);
  fmt::print("nodes       {} ({} leaves, {} internal)\n", grouped(t.node_count()), grouped(leaves),
             grouped(t.node_count() - leaves));
  fmt::print("build time  {:.1f} ms (points {} in {:.1f} ms)\n", loaded.build_ms,
             loaded.complete ? "generated in place" : "read", loaded.load_ms);
  if (gpu_ms >= 0)
    fmt::print("gpu build   {:.2f} ms (device_octree_builder, points already on the device, warm), node for node the host's tree\n", gpu_ms);
  fmt::print("\nlevel        nodes       leaves   points in leaves\n");
  for (const auto& r : levels)
    fmt::print("{:>5} {:>12} {:>12} {:>18}\n", r.level, grouped(r.nodes), grouped(r.leaves), grouped(r.leaf_points));

  fmt::print("\nleaf occupancy (points per leaf: min {}, mean {:.1f}, max {})\n", std::max(min_leaf_points, 0LL),
             leaves ? static_cast<double>(points) / static_cast<double>(leaves) : 0.0, max_leaf_points);
  long long widest = 1;
  for (const auto& b : histogram) widest = std::max(widest, b.leaves);
  for (const auto& b : histogram) {
    if (b.leaves == 0) continue;
    const auto range = b.min == b.max ? fmt::format("{}", b.min) : fmt::format("{}-{}", b.min, b.max);
    const auto bar = static_cast<std::size_t>((b.leaves * 40 + widest - 1) / widest);
    fmt::print("{:>13} {:>12}  {}\n", range, grouped(b.leaves), std::string(bar, '#'));
  }
  return exit_ok;
}

}  // namespace

command add_build_command(CLI::App& app) {
  auto o = std::make_shared<build_command_options>();
  auto* cmd = app.add_subcommand("build", "Build an octree; print its depth, nodes and leaves per level, the "
                                          "leaf-occupancy histogram and the build time");
  cmd->add_option("FILE", o->file, input_help)->required();
  add_tree_options(*cmd, o->tree);
  cmd->add_flag("--check", o->check, "also verify the layout invariants (every point in one leaf, boxes, links)");
  cmd->add_flag("--json", o->json, "print the report as JSON");
  cmd->add_option("--on", o->on,
                  "host: build_octree only; gpu: also build it on the GPU (device_octree_builder) from the same "
                  "points, check it node for node against the host build and report its time")
      ->check(CLI::IsMember({"host", "gpu"}))
      ->capture_default_str();
  cmd->footer("Examples:\n  canopy build plummer.bin --max-leaf 32\n  canopy build gen:lattice:5:8 --json");
  return {cmd, [o] { return run_build(*o); }};
}

}  // namespace canopy::tool
