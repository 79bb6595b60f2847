// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/errors.hpp>

#include <utility>

namespace canopy::trees {

input_error::input_error(std::string source, std::string problem)
    : std::runtime_error(source + ": " + problem), source_(std::move(source)), problem_(std::move(problem)) {}

invariant_error::invariant_error(std::int64_t node, const std::string& problem)
    : std::runtime_error(node >= 0 ? "octree node " + std::to_string(node) + ": " + problem : "octree: " + problem),
      node_(node) {}

graph_error::graph_error(kind k, std::vector<std::size_t> nodes, const std::string& problem)
    : std::runtime_error("task graph: " + problem), kind_(k), nodes_(std::move(nodes)) {}

}  // namespace canopy::trees
