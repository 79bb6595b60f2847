// SPDX-License-Identifier: Apache-2.0
// What the octree upward pass computes at each node, as a type the user chooses: a payload policy
// (cornerstone-octree's upsweep<T, CombinationFunction> is the model). The passes
// (canopy/passes/upward_pass.hpp, twig_pass.hpp, bucket_pass.hpp) are written once over it; the
// multipole payload (multipole_policy<T> in multipole.hpp) and the FMM's Cartesian expansions
// (canopy::fmm::expansion_policy in canopy/fmm/upward_policy.hpp) are two instances.
//
//   struct my_policy {
//     using value_type = my_payload;                           // trivially copyable
//     CANOPY_HD value_type identity() const;                   // what combining starts from
//     CANOPY_HD value_type leaf(std::int32_t node, const point* pts, std::int32_t n) const;
//     CANOPY_HD void combine(value_type& parent, const value_type& child,
//                            std::int32_t child_node, std::int32_t parent_node) const;
//     // data members: anything the operations need, e.g. per-node frames (device pointers on the GPU)
//   };
//
// `leaf` summarises a leaf's points pts[0, n) (P2M); `combine` adds one child's value into its
// parent's accumulator, which starts as identity() (M2M). The node ids let a policy look up
// per-node data it holds itself (a cell's centre and scale, so that combine can shift a child's
// expansion to its parent's centre) without the passes knowing about it. A parent's children are
// combined in child order on the CPU and on a GPU lane; a policy with its own lane-group
// operations (canopy/passes/group_payload.cuh) may combine them in another order, so combine
// should be associative and commutative up to rounding. A node is combined only after all its
// children are written, and every node is written once per pass.
//
// The policy object is copied into the pass's ops and from there into the GPU kernel's
// parameters: it must be trivially copyable and small (pointers and scalars). Its operations are
// called from host and device code (CANOPY_HD) and must not allocate.
#pragma once

#include <canopy/config.hpp>
#include <canopy/trees/point.hpp>

#include <concepts>
#include <cstdint>
#include <type_traits>

namespace canopy::trees {

/// P is a payload policy of the upward pass (see the header comment for the contract).
template <class P>
concept payload_policy =
    std::is_trivially_copyable_v<P> && requires { typename P::value_type; } &&
    std::is_trivially_copyable_v<typename P::value_type> &&
    requires(const P& policy, typename P::value_type& parent, const typename P::value_type& child, const point* pts,
             std::int32_t node, std::int32_t n) {
      { policy.identity() } -> std::same_as<typename P::value_type>;
      { policy.leaf(node, pts, n) } -> std::same_as<typename P::value_type>;
      { policy.combine(parent, child, node, node) } -> std::same_as<void>;
    };

template <class T>
struct multipole_policy;  // multipole.hpp

/// The passes' first template parameter, as a policy: a floating-point type T names the multipole
/// payload (multipole_policy<T>), so that upward_ops<float> keeps meaning what it always meant;
/// any other type is taken as a policy itself.
template <class Payload>
using as_payload_policy_t = std::conditional_t<std::is_floating_point_v<Payload>, multipole_policy<Payload>, Payload>;

/// The node value of a pass over Payload (multipole<T> for a floating-point T).
template <class Payload>
using payload_value_t = typename as_payload_policy_t<Payload>::value_type;

}  // namespace canopy::trees
