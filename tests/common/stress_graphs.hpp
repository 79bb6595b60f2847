// SPDX-License-Identifier: Apache-2.0
// Random graph shapes for the stress sweep (scheduler_stress.inc, both backends), and the
// value-mixing operation the GPU stress tests use (tests/gpu/stress/stress_common.cuh): value[t] =
// mix of seed_value(t) and the values of t's predecessors in pred_offsets order, wrapping unsigned
// arithmetic, so no overflow and any lost, repeated, early or stale read changes the result.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "canopy/config.hpp"
#include "canopy/task_graph.hpp"
#include "scheduler_test_graphs.hpp"

namespace canopy::testing {

CANOPY_HD inline std::uint64_t seed_value(task_id t) { return 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(t + 1); }
CANOPY_HD inline std::uint64_t mix_value(std::uint64_t acc, std::uint64_t pred) { return acc * 1099511628211ull + pred; }

// --- shapes --------------------------------------------------------------------------------------

struct shape {
  std::string name;
  canopy::task_graph graph;
};

// A random relabelling, so that no shape is always in id order.
inline std::vector<task_id> permute_parents(const std::vector<task_id>& parent, std::mt19937_64& rng) {
  const auto n = static_cast<std::int32_t>(parent.size());
  std::vector<task_id> perm(parent.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<task_id> out(parent.size(), canopy::no_task);
  for (std::int32_t i = 0; i < n; ++i)
    out[static_cast<std::size_t>(perm[i])] = parent[i] == canopy::no_task ? canopy::no_task : perm[parent[i]];
  return out;
}

inline shape random_shape(std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int kind = pick(0, 6);
  std::vector<task_id> parent;
  std::string name;
  switch (kind) {
    case 0: {  // random recursive tree, sometimes with a window (deep and narrow)
      const int n = pick(1, 600);
      const int window = pick(0, 1) ? pick(1, 4) : 0;
      parent = canopy::testing::random_tree_parents(n, rng(), window);
      name = "recursive n=" + std::to_string(n) + " window=" + std::to_string(window);
      break;
    }
    case 1: {  // chain
      const int n = pick(1, 400);
      parent.assign(static_cast<std::size_t>(n), canopy::no_task);
      for (int i = 1; i < n; ++i) parent[static_cast<std::size_t>(i)] = i - 1;
      name = "chain n=" + std::to_string(n);
      break;
    }
    case 2: {  // star: every leaf ready at once, one parent waiting for all
      const int n = pick(1, 800);
      parent.assign(static_cast<std::size_t>(n), 0);
      parent[0] = canopy::no_task;
      name = "star n=" + std::to_string(n);
      break;
    }
    case 3: {  // complete k-ary tree
      const int k = pick(2, 8);
      const int depth = pick(0, k <= 3 ? 7 : 3);
      std::int64_t n = 0, level = 1;
      for (int d = 0; d <= depth; ++d, level *= k) n += level;
      parent.assign(static_cast<std::size_t>(n), canopy::no_task);
      for (std::int64_t i = 1; i < n; ++i) parent[static_cast<std::size_t>(i)] = static_cast<task_id>((i - 1) / k);
      name = "complete k=" + std::to_string(k) + " depth=" + std::to_string(depth);
      break;
    }
    case 4: {  // forest: several roots, so several sinks
      const int n = pick(1, 500);
      parent = canopy::testing::random_tree_parents(n, rng());
      for (auto& p : parent)
        if (pick(0, 15) == 0) p = canopy::no_task;
      name = "forest n=" + std::to_string(n);
      break;
    }
    default: {  // random DAG (two kinds out of seven)
      const int n = pick(1, 400);
      const int preds = pick(1, 5);
      auto edges = canopy::testing::random_dag_edges(n, preds, rng());
      // relabel the DAG too
      std::vector<task_id> perm(static_cast<std::size_t>(n));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (auto& [a, b] : edges) a = perm[a], b = perm[b];
      std::shuffle(edges.begin(), edges.end(), rng);
      return {"dag n=" + std::to_string(n) + " max_preds=" + std::to_string(preds) + " edges=" + std::to_string(edges.size()),
              canopy::task_graph::from_edges(n, edges)};
    }
  }
  if (pick(0, 1)) parent = permute_parents(parent, rng);
  return {name, canopy::task_graph::from_parents(parent)};
}

// --- the operation and its reference -------------------------------------------------------------


inline std::vector<std::uint64_t> reference_values(const canopy::task_graph& g) {
  // Serial Kahn order.
  const auto n = static_cast<std::size_t>(g.task_count());
  std::vector<std::uint64_t> v(n, 0);
  std::vector<std::int32_t> left = g.dependency_count();
  std::vector<task_id> order = g.sources();
  for (std::size_t i = 0; i < order.size(); ++i) {
    const task_id t = order[i];
    std::uint64_t x = seed_value(t);
    for (std::int32_t j = g.pred_offsets()[t]; j < g.pred_offsets()[t + 1]; ++j) x = mix_value(x, v[g.predecessors()[j]]);
    v[t] = x;
    auto visit = [&](task_id s) {
      if (--left[s] == 0) order.push_back(s);
    };
    if (g.is_tree()) {
      if (g.parent()[t] != canopy::no_task) visit(g.parent()[t]);
    } else {
      for (std::int32_t j = g.succ_offsets()[t]; j < g.succ_offsets()[t + 1]; ++j) visit(g.successors()[j]);
    }
  }
  if (order.size() != n) throw std::logic_error("reference_values: the graph is not a DAG");
  return v;
}

}  // namespace canopy::testing
