// SPDX-License-Identifier: Apache-2.0
// The twig decomposition of an octree (canopy/passes/twig_pass.hpp).
#include "canopy/passes/twig_pass.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>

namespace canopy::trees {

twig_graph make_twig_graph(const octree& tree) {
  const auto nodes = static_cast<std::int32_t>(tree.parent.size());
  twig_graph out;
  if (nodes == 0) {
    out.graph = task_graph::from_parents({});
    return out;
  }
  // Per internal node, which children are leaves (children are contiguous: first_child ..
  // + child_count); a twig has only leaves.
  std::vector<std::int32_t> leaf_mask(static_cast<std::size_t>(nodes), 0);
  std::vector<char> twig(static_cast<std::size_t>(nodes), 0);
  for (std::int32_t n = 0; n < nodes; ++n) {
    const std::int32_t k = tree.child_count[n];
    if (k == 0) continue;
    for (std::int32_t c = 0; c < k; ++c)
      if (tree.child_count[tree.first_child[n] + c] == 0) leaf_mask[n] |= 1 << c;
    twig[n] = leaf_mask[n] == (1 << k) - 1 ? 1 : 0;
  }
  // Tasks in node order (level order, so parents come before children, like the node ids): every
  // internal node, followed by its leaf group's when it has both kinds of children, and the root
  // when it is the only node. Any other leaf is computed by its parent's twig or leaf group.
  std::vector<std::int32_t> task_of(static_cast<std::size_t>(nodes), -1);
  std::vector<task_id> parent;
  for (std::int32_t n = 0; n < nodes; ++n) {
    const std::int32_t p = tree.parent[n];
    if (tree.child_count[n] == 0 && p >= 0) continue;
    task_of[n] = static_cast<std::int32_t>(out.tasks.size());
    parent.push_back(p < 0 ? no_task : task_of[p]);  // parents come first: numbered already
    out.tasks.push_back(twig_task{twig[n] ? ~n : n, tree.first_child[n], tree.child_count[n], twig[n] ? leaf_mask[n] : 0});
    out.twig_count += twig[n];
    if (leaf_mask[n] != 0 && !twig[n]) {  // the leaf group, waited for by the node's task
      parent.push_back(task_of[n]);
      out.tasks.push_back(twig_task{~n, tree.first_child[n], tree.child_count[n], leaf_mask[n]});
    }
  }
  // Sources in Morton order: walk the leaves; a twig's first leaf stands for the twig, a leaf
  // group's first leaf for the group, a single root leaf for itself.
  std::vector<task_id> sources;
  sources.reserve(tree.leaves.size());
  for (const std::int32_t leaf : tree.leaves) {
    const std::int32_t p = tree.parent[leaf];
    if (p < 0) {
      sources.push_back(task_of[leaf]);
      continue;
    }
    const std::int32_t first_leaf = tree.first_child[p] + std::countr_zero(static_cast<std::uint32_t>(leaf_mask[p]));
    if (leaf != first_leaf) continue;
    sources.push_back(twig[p] ? task_of[p] : task_of[p] + 1);
  }
  out.graph = task_graph::from_parents(parent, sources);
  return out;
}

}  // namespace canopy::trees
