// The octree upward pass as a client of the scheduler: one task per node. A leaf computes its
// moments from its points (P2M); an internal node merges its children's (M2M). The scheduler only
// guarantees that a node runs after all of its children, and that their payloads are visible.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

#include "canopy/config.hpp"
#include "canopy/task_graph.hpp"
#include "canopy/trees/multipole.hpp"
#include "canopy/trees/octree.hpp"

namespace canopy::trees {

/// Views of the tree arrays (host or device memory) and the output payloads.
template <class T>
struct upward_ops {
  const point* points;
  const std::int32_t* first_child;
  const std::int32_t* child_count;
  const std::int32_t* point_begin;
  const std::int32_t* point_count;
  multipole<T>* payload;

  CANOPY_HD void operator()(task_id node) const {
    const std::int32_t children = child_count[node];
    if (children == 0) {
      payload[node] = p2m<T>(points + point_begin[node], point_count[node]);
      return;
    }
    const std::int32_t first = first_child[node];
    multipole<T> acc = payload[first];
    for (std::int32_t c = 1; c < children; ++c) acc = m2m_merge(acc, payload[first + c]);
    payload[node] = acc;
  }
};
static_assert(std::is_trivially_copyable_v<upward_ops<float>>);

/// The octree's dependency graph for the scheduler: each node's task depends on its children's.
/// Leaves are claimed in Morton order, so siblings land in the same block.
inline task_graph make_upward_graph(const octree& tree) {
  return task_graph::from_parents(tree.parent, tree.leaves);
}

/// Host views over a host octree (the CPU backend).
template <class T>
upward_ops<T> host_upward_ops(const octree& tree, multipole<T>* payload) {
  return upward_ops<T>{tree.points.data(),      tree.first_child.data(), tree.child_count.data(),
                       tree.point_begin.data(), tree.point_count.data(), payload};
}

}  // namespace canopy::trees
