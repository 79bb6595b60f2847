// SPDX-License-Identifier: Apache-2.0
// for_each_global_node (distributed_octree.hpp).
#pragma once

#include <canopy/trees/morton.hpp>

#include <vector>

namespace canopy::distributed {

template <class F>
void for_each_global_node(const distributed_octree& tree, const distributed_moments& moments, bool with_top, F&& f) {
  if (with_top) {
    for (std::int32_t n = 0; n < tree.top.node_count(); ++n) {
      f(int{tree.top.level[n]}, tree.top.prefix[n], moments.top[n]);
    }
  }
  const trees::octree& t = tree.local;
  const trees::morton_grid grid = trees::make_morton_grid(tree.top.cube);
  std::vector<std::int32_t> stack;
  for (const branch_location& at : tree.branches) {
    const std::int32_t branch = at.node;
    if (branch < 0) continue;
    stack.assign(1, branch);
    while (!stack.empty()) {
      const std::int32_t n = stack.back();
      stack.pop_back();
      if (n != branch) {
        const int level = t.level[n];
        f(level, trees::morton_prefix(trees::morton_code(t.points[t.point_begin[n]], grid), level), moments.local[n]);
      }
      for (std::int32_t c = 0; c < t.child_count[n]; ++c) stack.push_back(t.first_child[n] + c);
    }
  }
}

}  // namespace canopy::distributed
