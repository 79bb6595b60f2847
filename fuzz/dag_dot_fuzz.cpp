// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the Graphviz DOT DAG reader (canopy/dags/dag_io.hpp) over arbitrary text.
// Rejections must be one of the documented typed errors: canopy::trees::input_error (malformed
// DOT, undirected graph, bad weight, duplicate edge), canopy::trees::graph_error (cycle,
// self-loop) or canopy::error (from task_graph::from_edges). Anything else escaping is a crash.
// An accepted graph must be schedulable: a serial topological evaluation reaches every task.
#include <canopy/status.hpp>
#include <canopy/task_graph.hpp>
#include <canopy/dags/dag_io.hpp>
#include <canopy/trees/errors.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  canopy::task_graph g;
  try {
    g = canopy::trees::read_dag_dot(text);
  } catch (const canopy::trees::input_error&) {
    return 0;
  } catch (const canopy::trees::graph_error& e) {
    CANOPY_FUZZ_CHECK(!e.nodes().empty());
    return 0;
  } catch (const canopy::error&) {
    return 0;
  }
  // Kahn's algorithm over the accepted graph: every task must be reached exactly once.
  const std::int32_t n = g.task_count();
  CANOPY_FUZZ_CHECK(n >= 0);
  std::vector<std::int32_t> left = g.dependency_count();
  CANOPY_FUZZ_CHECK(left.size() == static_cast<std::size_t>(n));
  std::vector<canopy::task_id> order = g.sources();
  std::vector<char> seen(static_cast<std::size_t>(n), 0);
  std::int32_t sinks = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const canopy::task_id t = order[i];
    CANOPY_FUZZ_CHECK(t >= 0 && t < n && !seen[static_cast<std::size_t>(t)]);
    seen[static_cast<std::size_t>(t)] = 1;
    auto visit = [&](canopy::task_id s) {
      CANOPY_FUZZ_CHECK(s >= 0 && s < n && left[static_cast<std::size_t>(s)] > 0);
      if (--left[static_cast<std::size_t>(s)] == 0) order.push_back(s);
    };
    int succs = 0;
    if (g.is_tree()) {
      if (g.parent()[static_cast<std::size_t>(t)] != canopy::no_task) visit(g.parent()[static_cast<std::size_t>(t)]), ++succs;
    } else {
      for (std::int32_t j = g.succ_offsets()[t]; j < g.succ_offsets()[t + 1]; ++j) visit(g.successors()[j]), ++succs;
    }
    if (succs == 0) ++sinks;
  }
  CANOPY_FUZZ_CHECK(order.size() == static_cast<std::size_t>(n));
  CANOPY_FUZZ_CHECK(sinks == g.sink_count());
  return 0;
}
