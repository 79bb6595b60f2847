// SPDX-License-Identifier: Apache-2.0
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

#if defined(__CUDACC__)
#include "canopy/lane_group.cuh"
#include "canopy/passes/group_multipole.cuh"
#endif

namespace canopy::trees {

/// Views of an octree's arrays (host or device memory) and the output payloads: what every
/// upward-pass task reads and writes, whatever the task kind.
template <class T>
struct upward_arrays {
  const point* points;
  const std::int32_t* first_child;
  const std::int32_t* child_count;
  const std::int32_t* point_begin;
  const std::int32_t* point_count;
  multipole<T>* payload;
};

/// One task per node, over `arrays`.
/// `Lanes`: the lane group that runs one node on the GPU (group_multipole.cuh); the CPU backend
/// and the warp-master modes use one thread whatever it says.
/// `MergeBatch`: children a lane loads before merging them (1, 2 or 4, at most 8 / Lanes); more
/// loads in flight shorten each level of the climb, each held payload costs 17 registers.
template <class T, int Lanes = 2, int MergeBatch = (Lanes >= 8 ? 1 : 2)>
struct upward_ops {
  static constexpr int group_size = Lanes;
  /// An octree is a tree: the kernel needs no DAG paths (canopy/detail/dependency.hpp).
  static constexpr bool tree_only = true;

  upward_arrays<T> arrays;

  CANOPY_HD void operator()(task_id node) const {
    const std::int32_t children = arrays.child_count[node];
    if (children == 0) {
      arrays.payload[node] = p2m<T>(arrays.points + arrays.point_begin[node], arrays.point_count[node]);
      return;
    }
    const std::int32_t first = arrays.first_child[node];
    multipole<T> acc = arrays.payload[first];
    for (std::int32_t c = 1; c < children; ++c) acc = m2m_merge(acc, arrays.payload[first + c]);
    arrays.payload[node] = acc;
  }

#if defined(__CUDACC__)
  template <int G>
  __device__ void operator()(task_id node, const lane_group<G>& g) const {
    if constexpr (!std::is_same_v<T, float>) {
      if (g.rank == 0) (*this)(node);
    } else {
      const std::int32_t children = __ldg(arrays.child_count + node);
      multipole<float> r;
      if (children == 0) {
        r = group_p2m(g, arrays.points + __ldg(arrays.point_begin + node), __ldg(arrays.point_count + node));
      } else {
        // Children were written during this run by other SMs: read them through L2.
        constexpr int batch = MergeBatch < children_per_lane<G> ? MergeBatch : children_per_lane<G>;
        r = group_merge<G, batch>(g, arrays.payload + __ldg(arrays.first_child + node), children, load_through_l2{});
      }
      group_store(g, arrays.payload + node, r);
    }
  }
#endif
};
static_assert(std::is_trivially_copyable_v<upward_ops<float>>);
static_assert(std::is_trivially_copyable_v<upward_ops<double>>);

/// The octree's dependency graph for the scheduler: each node's task depends on its children's.
/// Leaves are claimed in Morton order, so siblings land in the same block.
inline task_graph make_upward_graph(const octree& tree) {
  return task_graph::from_parents(tree.parent, tree.leaves);
}

/// Lanes per node that suit `tree` on the GPU: about four points per lane, so that each lane keeps
/// four 16-byte loads in flight: mean leaf size >= 32 -> 8, >= 16 -> 4, else 2. Fewer lanes leave
/// loads unissued; more leave lanes idle on small leaves (measured by leaf size in bench/RESULTS.md).
inline int upward_lanes(std::int64_t points, std::int64_t leaves) {
  if (leaves <= 0) return 2;
  const double mean_leaf = static_cast<double>(points) / static_cast<double>(leaves);
  return mean_leaf >= 32 ? 8 : mean_leaf >= 16 ? 4 : 2;
}
inline int upward_lanes(const octree& tree) {
  return upward_lanes(static_cast<std::int64_t>(tree.points.size()), static_cast<std::int64_t>(tree.leaves.size()));
}

/// Calls f(std::integral_constant<int, L>{}) with L = lanes (1, 2, 4 or 8), so that a caller can
/// instantiate upward_ops<T, L> for a lane count chosen at run time:
///   with_upward_lanes(upward_lanes(tree), [&](auto lanes) { upward_ops<float, lanes()> ops{...}; });
template <class F>
decltype(auto) with_upward_lanes(int lanes, F&& f) {
  switch (lanes) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    default: return f(std::integral_constant<int, 8>{});
  }
}

/// Host views over a host octree (the CPU backend).
template <class T>
upward_ops<T> host_upward_ops(const octree& tree, multipole<T>* payload) {
  return upward_ops<T>{tree.points.data(),      tree.first_child.data(), tree.child_count.data(),
                       tree.point_begin.data(), tree.point_count.data(), payload};
}

}  // namespace canopy::trees
