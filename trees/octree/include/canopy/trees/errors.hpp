// SPDX-License-Identifier: Apache-2.0
// Typed errors of the trees library. Every message names where the bad input came from and what
// is wrong with it, so that the tool can print what() as its one line and exit non-zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::trees {

// Bad input: a malformed or truncated file, non-finite or negative values, an unknown name, a
// parameter out of range. `source` is the file path when the input is a file, otherwise the
// entry point and parameter (e.g. "build_octree: max_depth"). what() == "<source>: <problem>".
class input_error : public std::runtime_error {
 public:
  input_error(std::string source, std::string problem);
  const std::string& source() const noexcept { return source_; }
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::string source_;
  std::string problem_;
};

// Bytes from a file or a user, quoted for an error message: '...' around them, a quote or backslash
// escaped, any byte outside printable ASCII (newline, escape, NUL, UTF-8) as \xNN, and at most
// `max_bytes` of the input shown, then "... (N bytes)". So an echoed field can neither split the
// one-line message, reach the terminal as a control sequence, cut it at a NUL, nor make it long.
std::string quoted_bytes(std::string_view bytes, std::size_t max_bytes = 40);

// An octree that breaks one of the layout invariants of octree.hpp (thrown by check_invariants).
// node() is the offending node, or -1 when the problem is not tied to one node.
class invariant_error : public std::runtime_error {
 public:
  invariant_error(std::int64_t node, const std::string& problem);
  std::int64_t node() const noexcept { return node_; }

 private:
  std::int64_t node_;
};

// A task graph that cannot be scheduled (thrown by validate_task_graph). nodes() lists the
// vertices involved: the cycle in edge order, the vertex followed by its parents, or the roots.
class graph_error : public std::runtime_error {
 public:
  enum class kind { cycle, multiple_parents, multiple_roots };
  graph_error(kind k, std::vector<std::size_t> nodes, const std::string& problem);
  kind problem() const noexcept { return kind_; }
  const std::vector<std::size_t>& nodes() const noexcept { return nodes_; }

 private:
  kind kind_;
  std::vector<std::size_t> nodes_;
};

}  // namespace canopy::trees
