// SPDX-License-Identifier: Apache-2.0
// Random forests in the octree's layout (children contiguous: first_child .. + child_count), with
// the parent array of the same forest, for the tests of building task graphs from child ranges
// (canopy/device_task_graph.cuh and its portable steps). Header-only, host code.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "canopy/config.hpp"

namespace canopy::testing {

struct child_arrays {
  std::vector<std::int32_t> first_child;  // -1 for a leaf, as in the octree
  std::vector<std::int32_t> child_count;
  std::vector<task_id> parent;            // the same forest as a parent array
};

/// n tasks in `roots` trees, each task with 0..max_children children, numbered breadth-first like
/// the octree (the roots first, then each task's children together, in their parent's order), so
/// every parent id is below its children's. `shuffle_groups` then moves the roots and every
/// sibling group to random places in the id space, keeping siblings contiguous: parent ids end up
/// above some children and below others, so no id order proves the forest acyclic.
inline child_arrays random_child_arrays(std::int32_t n, std::uint64_t seed, int max_children = 8, std::int32_t roots = 1,
                                        bool shuffle_groups = false) {
  std::mt19937_64 rng(seed);
  child_arrays a;
  const auto size = static_cast<std::size_t>(n);
  a.first_child.assign(size, -1);
  a.child_count.assign(size, 0);
  a.parent.assign(size, no_task);
  roots = std::clamp(roots, n > 0 ? 1 : 0, n);
  std::int32_t next = roots;  // the next unused id
  for (std::int32_t t = 0; t < n && next < n; ++t) {
    int k = std::uniform_int_distribution<int>(0, max_children)(rng);
    if (t == next - 1 && k == 0) k = 1;  // the last task with ids left to hand out must have children
    k = std::min(k, n - next);
    if (k == 0) continue;
    a.first_child[static_cast<std::size_t>(t)] = next;
    a.child_count[static_cast<std::size_t>(t)] = k;
    for (int j = 0; j < k; ++j) a.parent[static_cast<std::size_t>(next + j)] = t;
    next += k;
  }
  if (!shuffle_groups || n == 0) return a;

  // Blocks of the id space: each root alone, each sibling group together. Lay them out in a
  // random order and renumber.
  std::vector<std::pair<std::int32_t, std::int32_t>> blocks;  // (first id, size)
  for (std::int32_t r = 0; r < roots; ++r) blocks.emplace_back(r, 1);
  for (std::int32_t t = 0; t < n; ++t)
    if (a.child_count[static_cast<std::size_t>(t)] > 0)
      blocks.emplace_back(a.first_child[static_cast<std::size_t>(t)], a.child_count[static_cast<std::size_t>(t)]);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  std::vector<std::int32_t> id(size);
  std::int32_t at = 0;
  for (const auto& [first, count] : blocks)
    for (std::int32_t j = 0; j < count; ++j) id[static_cast<std::size_t>(first + j)] = at++;
  child_arrays b;
  b.first_child.assign(size, -1);
  b.child_count.assign(size, 0);
  b.parent.assign(size, no_task);
  for (std::int32_t t = 0; t < n; ++t) {
    const auto u = static_cast<std::size_t>(id[static_cast<std::size_t>(t)]);
    const auto ts = static_cast<std::size_t>(t);
    b.child_count[u] = a.child_count[ts];
    b.first_child[u] = a.child_count[ts] > 0 ? id[static_cast<std::size_t>(a.first_child[ts])] : -1;
    b.parent[u] = a.parent[ts] == no_task ? no_task : id[static_cast<std::size_t>(a.parent[ts])];
  }
  return b;
}

/// A random relabelling of a parent array (the ids then say nothing about the order).
inline std::vector<task_id> shuffle_ids(const std::vector<task_id>& parent, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<task_id> perm(parent.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<task_id> out(parent.size(), no_task);
  for (std::size_t i = 0; i < parent.size(); ++i)
    out[static_cast<std::size_t>(perm[i])] = parent[i] == no_task ? no_task : perm[static_cast<std::size_t>(parent[i])];
  return out;
}

}  // namespace canopy::testing
