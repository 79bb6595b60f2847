// SPDX-License-Identifier: Apache-2.0
#include <canopy/dags/dag_io.hpp>
#include <canopy/trees/errors.hpp>
#include <canopy/dags/boost_task_graph.hpp>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/graphviz.hpp>
#include <boost/property_map/dynamic_property_map.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <new>
#include <numeric>
#include <sstream>

namespace canopy::trees {

namespace {

struct dot_vertex {
  std::string name;
  std::string weight;
};
// vecS edges: parallel edges are kept, so a duplicate dependency reaches us and is reported
// instead of being merged away.
using dot_graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, dot_vertex>;

// Boost's messages may span lines (the parser quotes the offending token); the tool prints one.
std::string one_line(std::string s) {
  std::replace_if(s.begin(), s.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return s;
}

bool is_decimal_id(const std::string& s) {
  // 18 digits always fit in int64; longer numeric names are ordered as names.
  return !s.empty() && s.size() <= 18 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::int64_t parse_weight(const std::string& text, const std::string& node, const std::string& source) {
  if (text.empty()) return 0;
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || at != end)
    throw input_error(source, "node " + quoted_bytes(node) + ": weight " + quoted_bytes(text) + " is not a 64-bit integer");
  return value;
}

// A DOT name in a message: as written when it is a plain word, else quoted and escaped (errors.hpp).
std::string label(const std::string& name) {
  const bool plain = !name.empty() && name.size() <= 40 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
  });
  return plain ? name : quoted_bytes(name);
}

// At most 16 names of the cycle: a 100,000-node cycle made one 889 kB line.
std::string cycle_text(const std::vector<std::size_t>& cycle, const std::vector<std::string>& names) {
  constexpr std::size_t shown = 16;
  std::string s;
  for (std::size_t i = 0; i < cycle.size() && i < shown; ++i) s += label(names[cycle[i]]) + " -> ";
  if (cycle.size() > shown) return s + "... (" + std::to_string(cycle.size()) + " tasks) -> " + label(names[cycle.front()]);
  return s + label(names[cycle.front()]);
}

// Boost's DOT parser descends recursively into every `{` (subgraphs) and `[` (attribute lists):
// 30,000 nested braces overflowed the stack (SIGSEGV). No DAG needs more than a few levels, so the
// nesting is bounded before Boost sees the text. Only quoted strings are skipped (the lexer reads
// them as one token); braces anywhere else count, comments included, so that the bound can only
// be stricter than what Boost would recurse into.
void check_nesting(std::string_view text, const std::string& source) {
  int depth = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {  // up to the next unescaped quote
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
    } else if (c == '{' || c == '[') {
      if (++depth > max_dot_nesting)
        throw input_error(source, "braces or brackets nested deeper than " + std::to_string(max_dot_nesting) +
                                      " levels (at byte " + std::to_string(i) + ")");
    } else if (c == '}' || c == ']') {
      --depth;  // unbalanced input is Boost's to report
    }
  }
}

std::string too_large() {
  return "larger than the " + std::to_string(max_dot_bytes >> 20) + " MiB a DOT input may have (max_dot_bytes)";
}

}  // namespace

dot_dag parse_dag_dot(std::string_view text, const std::string& source) {
  if (text.size() > max_dot_bytes) throw input_error(source, too_large());
  check_nesting(text, source);
  dot_graph g;
  boost::dynamic_properties dp(boost::ignore_other_properties);
  dp.property("node_id", boost::get(&dot_vertex::name, g));
  dp.property("weight", boost::get(&dot_vertex::weight, g));
  try {
    if (!boost::read_graphviz(std::string(text), g, dp, "node_id"))
      throw input_error(source, "not a Graphviz DOT graph");
  } catch (const boost::undirected_graph_error&) {
    throw input_error(source, "an undirected graph; a dependency DAG is a 'digraph' (edges a -> b: b depends on a)");
  } catch (const boost::graph_exception& e) {
    throw input_error(source, "malformed DOT: " + one_line(e.what()));
  }

  const std::size_t n = boost::num_vertices(g);
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw input_error(source, "more than 2^31-1 nodes");
  // Boost numbers vertices by name (its parser keeps them in a std::map); numeric names are
  // re-ordered by value so that a file naming its nodes 0..n-1 keeps those ids.
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  const bool numeric = std::all_of(order.begin(), order.end(), [&](std::size_t v) { return is_decimal_id(g[v].name); });
  if (numeric)
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return std::stoll(g[a].name) < std::stoll(g[b].name);
    });
  std::vector<task_id> id_of(n);
  dot_dag out;
  out.names.resize(n);
  out.weights.resize(n);
  for (std::size_t t = 0; t < n; ++t) {
    const auto& v = g[order[t]];
    id_of[order[t]] = static_cast<task_id>(t);
    out.names[t] = v.name;
    out.weights[t] = parse_weight(v.weight, v.name, source);
  }

  std::vector<std::pair<task_id, task_id>> edges;
  edges.reserve(boost::num_edges(g));
  boost_task_graph check(n);  // the Boost.Graph view validate_task_graph searches for cycles
  for (const auto e : boost::make_iterator_range(boost::edges(g))) {
    const task_id from = id_of[boost::source(e, g)], to = id_of[boost::target(e, g)];
    edges.emplace_back(from, to);
    boost::add_edge(static_cast<std::size_t>(from), static_cast<std::size_t>(to), check);
  }
  try {
    validate_task_graph(check, graph_shape::dag);
  } catch (const graph_error& e) {
    throw graph_error(e.problem(), e.nodes(), "cycle " + cycle_text(e.nodes(), out.names) + " in " + source);
  }
  std::vector<std::pair<task_id, task_id>> sorted = edges;
  std::sort(sorted.begin(), sorted.end());
  if (const auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end())
    throw input_error(source, "duplicate edge " + label(out.names[static_cast<std::size_t>(dup->first)]) + " -> " +
                                  label(out.names[static_cast<std::size_t>(dup->second)]));
  out.graph = canopy::task_graph::from_edges(static_cast<std::int32_t>(n), edges);
  return out;
}

namespace {

// At most max_dot_bytes of `in`; more is an input_error, whatever the file claimed its size was
// (a /proc file says 0).
std::string read_bounded(std::istream& in, const std::string& source) {
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_dot_bytes) throw input_error(source, too_large());
  }
  if (in.bad()) throw input_error(source, "read failed");
  return text;
}

}  // namespace

dot_dag load_dag_dot(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  const std::string source = path.string();
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) throw input_error(source, "no such file");
  if (ec) throw input_error(source, "cannot open: " + ec.message());
  if (fs::is_directory(st)) throw input_error(source, "is a directory, not a DOT file");
  // A FIFO would block the reader, /dev/zero would never end: like the point readers, only
  // regular files.
  if (!fs::is_regular_file(st)) throw input_error(source, "not a regular file");
  const std::uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > max_dot_bytes) throw input_error(source, too_large());
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw input_error(source, std::string("cannot open: ") + std::strerror(errno != 0 ? errno : EIO));
  return parse_dag_dot(read_bounded(in, source), source);
}

canopy::task_graph read_dag_dot(std::string_view text) { return parse_dag_dot(text).graph; }

canopy::task_graph read_dag_dot(std::istream& in) { return parse_dag_dot(read_bounded(in, "DOT input")).graph; }

canopy::task_graph read_dag_dot_file(const std::filesystem::path& path) { return load_dag_dot(path).graph; }

}  // namespace canopy::trees
