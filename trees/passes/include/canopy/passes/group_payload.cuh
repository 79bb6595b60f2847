// SPDX-License-Identifier: Apache-2.0
// The device side of a payload policy (canopy/trees/payload_policy.hpp): how a lane group of the
// GPU passes computes a leaf, combines a node's children and stores a value. The passes' kernels
// call only these five operations, resolved at compile time, so a policy pays for no indirection.
//
// The primary template below serves every policy, correctly and simply: one lane of the group
// (rank 0) runs the policy's own leaf and combine, reads children written during the run through
// L2 (ld.global.cg: another SM's results must not come from a stale line of this SM's L1, ArborX
// #574 / Axom #307) and stores. A policy that wants the group's lanes specialises
// group_payload<Policy> before the pass headers are instantiated, as group_multipole.cuh does for
// multipole_policy<float>: every lane then holds the value (the butterflies' results are equal in
// all lanes) and the lanes share the loads and the store.
//
// The contract of a specialisation (G: lanes of the group, all calling in convergence):
//   leaf<G>(policy, g, node, p4, n, load)       the leaf's value from points p4[0, n), each read
//                                               with load(const float4*) (load_points_ldg for
//                                               global memory, load_points_plain for staged ones)
//   children<G, Batch>(policy, g, node, payload, first, count)
//                                               node's value from payload[first, first + count),
//                                               written during this run (read through L2); Batch:
//                                               loads a lane may keep in flight (a hint)
//   gather<Stride, G>(policy, g, node, payload, first, count, mine)
//                                               a twig's value: the sub-group of Stride lanes at
//                                               rank / Stride holds `mine`, the value of child
//                                               first + rank / Stride (empty() where that is no
//                                               child), which it has stored at payload[first + c]
//   empty(policy)                               what a lane with no child holds
//   store<G>(g, p, value)                       writes the value the group computed to *p
// Values pass from leaf/children/gather to store (and leaf to gather) within one group only, so a
// specialisation may keep them in some lanes and not others.
#pragma once

#if !defined(__CUDACC__)
#error "canopy/passes/group_payload.cuh is device code: include it from .cu files only"
#endif

#include <canopy/lane_group.cuh>
#include <canopy/trees/payload_policy.hpp>
#include <canopy/trees/point.hpp>

#include <cstdint>
#include <cstring>

namespace canopy::trees {

// How a leaf's points are read (global memory through the read-only path, or a plain load of
// points staged in shared memory); shared by every policy's leaf.
struct load_points_ldg {
  __device__ float4 operator()(const float4* p) const { return __ldg(p); }
};
struct load_points_plain {
  __device__ float4 operator()(const float4* p) const { return *p; }
};

/// *p read through L2 only (ld.global.cg), word by word: a value that another SM wrote during this
/// kernel (see load_through_l2 in group_multipole.cuh for why).
template <class V>
__device__ __forceinline__ V load_words_through_l2(const V* p) {
  static_assert(sizeof(V) % sizeof(std::uint32_t) == 0 && alignof(V) >= alignof(std::uint32_t),
                "a GPU payload is read as 32-bit words: its size must be a multiple of 4 bytes, its alignment at least 4");
  constexpr int words = static_cast<int>(sizeof(V) / sizeof(std::uint32_t));
  std::uint32_t w[words];
  const auto* src = reinterpret_cast<const std::uint32_t*>(p);
#pragma unroll
  for (int i = 0; i < words; ++i) w[i] = __ldcg(src + i);
  V r;
  std::memcpy(&r, w, sizeof r);
  return r;
}

template <class Policy>
struct group_payload {
  static_assert(payload_policy<Policy>, "group_payload<Policy>: Policy must satisfy canopy::trees::payload_policy");
  using value_type = typename Policy::value_type;

  __device__ static value_type empty(const Policy& policy) { return policy.identity(); }

  template <int G, class Load>
  __device__ static value_type leaf(const Policy& policy, const lane_group<G>& g, std::int32_t node, const float4* p4,
                                    std::int32_t n, Load) {
    value_type r = policy.identity();
    // point and float4 are both 16 bytes, 16-aligned: the policy reads them as points (staged
    // points in shared memory through a generic pointer).
    if (g.rank == 0) r = policy.leaf(node, reinterpret_cast<const point*>(p4), n);
    return r;
  }

  template <int G, int Batch>
  __device__ static value_type children(const Policy& policy, const lane_group<G>& g, std::int32_t node,
                                        const value_type* payload, std::int32_t first, std::int32_t count) {
    value_type acc = policy.identity();
    if (g.rank == 0) {
      for (std::int32_t c = first; c < first + count; ++c) policy.combine(acc, load_words_through_l2(payload + c), c, node);
    }
    return acc;
  }

  template <int Stride, int G>
  __device__ static value_type gather(const Policy& policy, const lane_group<G>& g, std::int32_t node,
                                      const value_type* payload, std::int32_t first, std::int32_t count,
                                      const value_type& /*mine: in other lanes; read back from memory*/) {
    g.sync();  // the sub-groups' stores of the children, ordered before lane 0 reads them
    return children<G, 1>(policy, g, node, payload, first, count);
  }

  template <int G>
  __device__ static void store(const lane_group<G>& g, value_type* p, const value_type& v) {
    if (g.rank == 0) *p = v;
  }
};

}  // namespace canopy::trees
