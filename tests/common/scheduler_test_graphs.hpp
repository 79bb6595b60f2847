// SPDX-License-Identifier: Apache-2.0
// Random trees and DAGs, and an oracle op, shared by the CPU and GPU scheduler tests.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "canopy/task_graph.hpp"

namespace canopy::testing {

/// Random forest-free tree: task 0 is the root, every other task's parent is an earlier task.
/// `fanout_bias` > 0 makes wide, shallow trees; 0 makes long chains likelier.
inline std::vector<task_id> random_tree_parents(std::int32_t n, std::uint64_t seed, int window = 0) {
  std::mt19937_64 rng(seed);
  std::vector<task_id> parent(static_cast<std::size_t>(n), no_task);
  for (std::int32_t i = 1; i < n; ++i) {
    const std::int32_t lo = window > 0 && i > window ? i - window : 0;
    parent[static_cast<std::size_t>(i)] = std::uniform_int_distribution<std::int32_t>(lo, i - 1)(rng);
  }
  return parent;
}

inline std::vector<std::pair<task_id, task_id>> random_dag_edges(std::int32_t n, int max_preds, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::pair<task_id, task_id>> edges;
  for (std::int32_t b = 1; b < n; ++b) {
    const int k = std::uniform_int_distribution<int>(0, max_preds)(rng);
    std::vector<task_id> preds;
    for (int j = 0; j < k; ++j) preds.push_back(std::uniform_int_distribution<std::int32_t>(0, b - 1)(rng));
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    for (task_id a : preds) edges.emplace_back(a, b);
  }
  return edges;
}

/// value[t] = 1 + sum of value over t's predecessors, computed serially in topological order;
/// `unreached` where the order never gets to (the tasks behind a withheld dependency).
template <class V = std::int64_t>
std::vector<V> serial_values(const task_graph& g, V unreached = V(-1)) {
  std::vector<V> v(static_cast<std::size_t>(g.task_count()), unreached);
  std::vector<std::int32_t> left = g.dependency_count();
  std::vector<task_id> order = g.sources();
  for (std::size_t i = 0; i < order.size(); ++i) {
    const task_id t = order[i];
    V s = 1;
    for (std::int32_t j = g.pred_offsets()[t]; j < g.pred_offsets()[t + 1]; ++j) s += v[g.predecessors()[j]];
    v[t] = s;
    auto visit = [&](task_id x) {
      if (--left[x] == 0) order.push_back(x);
    };
    if (g.is_tree()) {
      if (g.parent()[t] != no_task) visit(g.parent()[t]);
    } else {
      for (std::int32_t j = g.succ_offsets()[t]; j < g.succ_offsets()[t + 1]; ++j) visit(g.successors()[j]);
    }
  }
  return v;
}

}  // namespace canopy::testing
