// SPDX-License-Identifier: Apache-2.0
// The octree upward pass as a client of the scheduler: one task per node. A leaf summarises its
// points (P2M); an internal node combines its children's values (M2M). The scheduler only
// guarantees that a node runs after all of its children, and that their payloads are visible.
//
// What a node holds is the payload policy's choice (canopy/trees/payload_policy.hpp): the ops'
// first template parameter is a policy, or a floating-point type T for the multipole payload
// (multipole_policy<T>), so upward_ops<float> is the pass it always was.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

#include "canopy/config.hpp"
#include "canopy/task_graph.hpp"
#include "canopy/trees/multipole.hpp"
#include "canopy/trees/octree.hpp"
#include "canopy/trees/payload_policy.hpp"

#if defined(__CUDACC__)
#include "canopy/lane_group.cuh"
#include "canopy/passes/group_multipole.cuh"
#include "canopy/passes/group_payload.cuh"
#endif

namespace canopy::trees {

/// Views of an octree's arrays (host or device memory) and the output payloads: what every
/// upward-pass task reads and writes, whatever the task kind. `Payload`: a payload policy, or a
/// floating-point T for multipole<T> payloads.
template <class Payload = float>
struct upward_arrays {
  const point* points;
  const std::int32_t* first_child;
  const std::int32_t* child_count;
  const std::int32_t* point_begin;
  const std::int32_t* point_count;
  payload_value_t<Payload>* payload;
};

namespace detail {
/// The clear error for a pass instantiated with something that is no payload policy.
template <class Policy>
constexpr bool checked_payload_policy() {
  static_assert(payload_policy<Policy>,
                "the upward pass's Payload must be float or double (the multipole payload) or a type that satisfies "
                "canopy::trees::payload_policy (value_type, identity(), leaf(node, points, n), combine(parent, child, "
                "child_node, parent_node); see canopy/trees/payload_policy.hpp)");
  return true;
}

/// A node's value from its children's, in child order: the serial form of every task kind.
/// The first child is combined outside the loop so that, with the identity a compile-time
/// constant, a policy whose combine returns the other side for an identity (the multipole's
/// m2m_merge) folds it into a copy: the loop the multipole pass had before it was generic.
template <class Policy>
CANOPY_HD typename Policy::value_type combine_children(const Policy& policy, const typename Policy::value_type* payload,
                                                       std::int32_t node, std::int32_t first, std::int32_t count) {
  typename Policy::value_type acc = policy.identity();
  policy.combine(acc, payload[first], first, node);
  for (std::int32_t c = first + 1; c < first + count; ++c) policy.combine(acc, payload[c], c, node);
  return acc;
}
}  // namespace detail

/// One task per node, over `arrays`.
/// `Payload`: the payload policy (canopy/trees/payload_policy.hpp), or float / double for the
/// multipole payload. `policy`: its state (per-node frames, ...), empty for the multipole.
/// `Lanes`: the lane group that runs one node on the GPU (group_payload.cuh; a policy without lane
/// operations of its own runs on one lane of it); the CPU backend and the warp-master modes use one
/// thread whatever it says.
/// `MergeBatch`: children a lane loads before merging them (1, 2 or 4, at most 8 / Lanes); more
/// loads in flight shorten each level of the climb, each held payload costs 17 registers.
template <class Payload = float, int Lanes = 2, int MergeBatch = (Lanes >= 8 ? 1 : 2)>
struct upward_ops {
  using policy_type = as_payload_policy_t<Payload>;
  using value_type = typename policy_type::value_type;
  static_assert(detail::checked_payload_policy<policy_type>());
  static constexpr int group_size = Lanes;
  /// An octree is a tree: the kernel needs no DAG paths (canopy/detail/dependency.hpp).
  static constexpr bool tree_only = true;

  upward_arrays<Payload> arrays;
  policy_type policy{};

  CANOPY_HD void operator()(task_id node) const {
    const std::int32_t children = arrays.child_count[node];
    if (children == 0) {
      arrays.payload[node] = policy.leaf(node, arrays.points + arrays.point_begin[node], arrays.point_count[node]);
      return;
    }
    arrays.payload[node] = detail::combine_children(policy, arrays.payload, node, arrays.first_child[node], children);
  }

#if defined(__CUDACC__)
  template <int G>
  __device__ void operator()(task_id node, const lane_group<G>& g) const {
    using group_ops = group_payload<policy_type>;
    const std::int32_t children = __ldg(arrays.child_count + node);
    value_type r;
    if (children == 0) {
      // point is alignas(16) and 16 bytes: one 128-bit load each.
      r = group_ops::leaf(policy, g, node, reinterpret_cast<const float4*>(arrays.points + __ldg(arrays.point_begin + node)),
                          __ldg(arrays.point_count + node), load_points_ldg{});
    } else {
      // Children were written during this run by other SMs: read them through L2.
      constexpr int batch = MergeBatch < children_per_lane<G> ? MergeBatch : children_per_lane<G>;
      r = group_ops::template children<G, batch>(policy, g, node, arrays.payload, __ldg(arrays.first_child + node), children);
    }
    group_ops::store(g, arrays.payload + node, r);
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
/// The same for any payload policy and its state.
template <payload_policy Policy>
upward_ops<Policy> host_upward_ops(const octree& tree, typename Policy::value_type* payload, const Policy& policy) {
  return upward_ops<Policy>{{tree.points.data(), tree.first_child.data(), tree.child_count.data(), tree.point_begin.data(),
                             tree.point_count.data(), payload},
                            policy};
}

}  // namespace canopy::trees
