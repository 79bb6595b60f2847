// SPDX-License-Identifier: Apache-2.0
// Where a global leaf (a branch node) lies in a rank's local octree, and its payload from the
// local pass: the local node of that cell when there is one, else the moments of the cell's
// points inside the local leaf that holds them. Portable (CANOPY_HD): the CPU path calls these per
// branch, the GPU path from one thread per branch over the device tree.
#pragma once

#include <canopy/config.hpp>
#include <canopy/passes/octree_ref.hpp>
#include <canopy/trees/morton.hpp>
#include <canopy/trees/multipole.hpp>

#include <cstdint>

namespace canopy::distributed {

// node >= 0: the local node of the cell (its subtree is the global octree's). node < 0: the cell's
// points are the sorted points [begin, end) of a local leaf above it (at most max_leaf of them:
// the cell is a leaf of the global octree); begin == end: the local tree has no point of it.
struct branch_location {
  std::int32_t node;
  std::int32_t begin;
  std::int32_t end;
};

// The cell (level, prefix) of the tree's cube (`grid` = make_morton_grid of it). Walks from the
// root along the cell's prefix; a child's cell is read from the code of its first point.
CANOPY_HD inline branch_location locate_branch(const trees::octree_ref& t, const trees::morton_grid& grid, int level,
                                               std::uint64_t prefix) {
  if (t.point_total == 0) return {-1, 0, 0};
  std::int32_t node = 0;
  for (int l = 0; l < level; ++l) {
    if (t.child_count[node] == 0) {
      // A local leaf above the cell: the cell's points are a contiguous run of its sorted points.
      std::int32_t b = t.point_begin[node];
      const std::int32_t e = b + t.point_count[node];
      while (b < e && trees::morton_prefix(trees::morton_code(t.points[b], grid), level) != prefix) ++b;
      std::int32_t end = b;
      while (end < e && trees::morton_prefix(trees::morton_code(t.points[end], grid), level) == prefix) ++end;
      return {-1, b, end};
    }
    const std::uint64_t want = prefix >> (3 * (level - l - 1));
    std::int32_t next = -1;
    for (std::int32_t c = t.first_child[node]; c < t.first_child[node] + t.child_count[node]; ++c) {
      if (trees::morton_prefix(trees::morton_code(t.points[t.point_begin[c]], grid), l + 1) == want) {
        next = c;
        break;
      }
    }
    if (next < 0) return {-1, 0, 0};
    node = next;
  }
  return {node, t.point_begin[node], t.point_begin[node] + t.point_count[node]};
}

CANOPY_HD inline trees::multipole<float> branch_payload(const trees::octree_ref& t,
                                                        const trees::multipole<float>* payloads,
                                                        const branch_location& at) {
  if (at.node >= 0) return payloads[at.node];
  if (at.begin == at.end) return trees::multipole_identity<float>();
  return trees::p2m<float>(t.points + at.begin, at.end - at.begin);
}

}  // namespace canopy::distributed
