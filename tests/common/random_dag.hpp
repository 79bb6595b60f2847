// SPDX-License-Identifier: Apache-2.0
// Seeded random DAGs for the scheduler tests (CPU and GPU, header-only, no Boost so it compiles in
// .cu files). Acyclic by construction: every edge goes from a lower to a higher position in a
// hidden order, and task ids are a random permutation of that order, so the ids say nothing about
// which task may run first.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "canopy/config.hpp"

namespace canopy::test {

enum class dag_shape {
  wide,    ///< few levels of many tasks, each depending on 1-4 tasks of the level before
  deep,    ///< a long chain, each task also depending on up to 2 random earlier tasks
  random,  ///< each task depends on 0-3 random earlier tasks (many sources, joins and forks)
};

inline std::string to_string(dag_shape s) {
  switch (s) {
    case dag_shape::wide: return "wide";
    case dag_shape::deep: return "deep";
    case dag_shape::random: return "random";
  }
  return "unknown";
}

struct random_dag {
  std::int32_t task_count = 0;
  std::vector<std::pair<task_id, task_id>> edges;  ///< (a, b): b depends on a; no duplicates
  std::vector<std::int64_t> weights;               ///< one per task, may be negative
};

inline random_dag make_random_dag(std::int32_t n, dag_shape shape, std::uint32_t seed) {
  std::mt19937 rng(seed * 2654435761u + static_cast<std::uint32_t>(n) + static_cast<std::uint32_t>(shape));
  auto below = [&](std::int32_t k) { return static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(k)); };
  random_dag d;
  d.task_count = n;
  std::vector<task_id> id(static_cast<std::size_t>(n));  // position in the hidden order -> task id
  std::iota(id.begin(), id.end(), 0);
  std::shuffle(id.begin(), id.end(), rng);
  const std::int32_t width = std::max(1, n / 8);  // wide: 8 levels
  for (std::int32_t pos = 1; pos < n; ++pos) {
    std::vector<std::int32_t> from;
    if (shape == dag_shape::wide) {
      const std::int32_t level_start = pos / width * width;
      if (level_start == 0) continue;  // the first level holds the sources
      const std::int32_t prev_start = level_start - width;
      for (int k = 1 + below(4); k > 0; --k) from.push_back(prev_start + below(width));
    } else if (shape == dag_shape::deep) {
      from.push_back(pos - 1);
      for (int k = below(3); k > 0; --k) from.push_back(below(pos));
    } else {
      for (int k = below(4); k > 0; --k) from.push_back(below(pos));
    }
    std::sort(from.begin(), from.end());
    from.erase(std::unique(from.begin(), from.end()), from.end());
    for (const std::int32_t f : from) d.edges.emplace_back(id[static_cast<std::size_t>(f)], id[static_cast<std::size_t>(pos)]);
  }
  std::shuffle(d.edges.begin(), d.edges.end(), rng);
  d.weights.resize(static_cast<std::size_t>(n));
  for (auto& w : d.weights) w = static_cast<std::int64_t>(rng() % 2001u) - 1000;
  return d;
}

}  // namespace canopy::test
