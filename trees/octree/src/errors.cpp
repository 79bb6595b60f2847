// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/errors.hpp>

#include <utility>

namespace canopy::trees {

input_error::input_error(std::string source, std::string problem)
    : std::runtime_error(source + ": " + problem), source_(std::move(source)), problem_(std::move(problem)) {}

invariant_error::invariant_error(std::int64_t node, const std::string& problem)
    : std::runtime_error(node >= 0 ? "octree node " + std::to_string(node) + ": " + problem : "octree: " + problem),
      node_(node) {}

std::string quoted_bytes(std::string_view bytes, std::size_t max_bytes) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "'";
  const std::size_t shown = bytes.size() <= max_bytes ? bytes.size() : max_bytes;
  for (std::size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 32 && c < 127) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  out += '\'';
  if (shown < bytes.size()) out += "... (" + std::to_string(bytes.size()) + " bytes)";
  return out;
}

graph_error::graph_error(kind k, std::vector<std::size_t> nodes, const std::string& problem)
    : std::runtime_error("task graph: " + problem), kind_(k), nodes_(std::move(nodes)) {}

}  // namespace canopy::trees
