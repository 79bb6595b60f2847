// The twig decomposition of an octree (canopy/passes/twig_pass.hpp).
#include "canopy/passes/twig_pass.hpp"

#include <cstddef>

namespace canopy::trees {

twig_graph make_twig_graph(const octree& tree) {
  const auto nodes = static_cast<std::int32_t>(tree.parent.size());
  twig_graph out;
  if (nodes == 0) {
    out.graph = task_graph::from_parents({});
    return out;
  }
  // A twig: internal, every child a leaf. (Children are contiguous: first_child .. + child_count.)
  std::vector<char> twig(static_cast<std::size_t>(nodes), 0);
  for (std::int32_t n = 0; n < nodes; ++n) {
    const std::int32_t k = tree.child_count[n];
    if (k == 0) continue;
    bool all_leaves = true;
    for (std::int32_t c = tree.first_child[n]; c < tree.first_child[n] + k; ++c) all_leaves = all_leaves && tree.child_count[c] == 0;
    twig[n] = all_leaves ? 1 : 0;
  }
  // Tasks in node order (level order, so parents come before children, like the node ids).
  std::vector<std::int32_t> task_of(static_cast<std::size_t>(nodes), -1);
  for (std::int32_t n = 0; n < nodes; ++n) {
    const std::int32_t p = tree.parent[n];
    const bool fused = tree.child_count[n] == 0 && p >= 0 && twig[p];
    if (fused) continue;
    task_of[n] = static_cast<std::int32_t>(out.tasks.size());
    out.tasks.push_back(twig_task{twig[n] ? ~n : n, tree.first_child[n], tree.child_count[n], 0});
    out.twig_count += twig[n];
  }
  std::vector<task_id> parent(out.tasks.size(), no_task);
  for (std::size_t t = 0; t < out.tasks.size(); ++t) {
    const std::int32_t p = tree.parent[out.tasks[t].node()];
    parent[t] = p < 0 ? no_task : task_of[p];
  }
  // Sources in Morton order: walk the leaves; a fused leaf stands for its twig (once, at its first
  // child), any other leaf for itself.
  std::vector<task_id> sources;
  sources.reserve(tree.leaves.size());
  for (const std::int32_t leaf : tree.leaves) {
    const std::int32_t p = tree.parent[leaf];
    if (task_of[leaf] >= 0) sources.push_back(task_of[leaf]);
    else if (tree.first_child[p] == leaf) sources.push_back(task_of[p]);
  }
  out.graph = task_graph::from_parents(parent, sources);
  return out;
}

}  // namespace canopy::trees
