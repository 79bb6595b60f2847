// SPDX-License-Identifier: Apache-2.0
// Warp-aggregated atomic reduction by key (seed 004, "Voting and Shuffling to Optimize Atomic
// Operations"): the active lanes of a warp that target the same key find each other with
// __match_any_sync (cooperative_groups::labeled_partition), sum their values with a warp
// reduction, and one lane per distinct key issues the atomic. A warp whose lanes share few keys
// (partially sorted input: particles binned into cells, a smooth image into a histogram) issues
// a few atomics instead of 32; random keys gain nothing and pay the match instruction.
//
// Portable: in host code each call is one plain atomic fetch_add on bins[key].
#pragma once

#include <cuda/atomic>
#include <cuda/std/type_traits>

#include "canopy/config.hpp"

#if defined(__CUDACC__)
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

#include "canopy/atomics/detail/warp_sync.cuh"
#endif

namespace canopy::atomics {

/// bins[key] += value, combined across the active lanes of the warp that pass the same key:
/// one atomic per distinct key per warp. `Scope` is the scope of the atomics on `bins` (device
/// for global memory read by other blocks, block for a shared-memory table), e.g.
///   warp_reduce_by_key_add<cuda::thread_scope_device>(bins, key, 1u, cuda::std::memory_order_relaxed);
/// T: any type cuda::atomic_ref supports fetch_add for (integers, float, double). Float sums are
/// combined in a different order than one atomic per element; the result may differ in rounding.
template <cuda::thread_scope Scope, class T, class Key>
CANOPY_HD CANOPY_FORCEINLINE void warp_reduce_by_key_add(T* bins, Key key, T value, cuda::std::memory_order order) {
  static_assert(cuda::std::is_integral_v<Key>, "keys are integral bin indices");
#if CANOPY_DEVICE_CODE
  namespace cg = cooperative_groups;
  const cg::coalesced_group active = cg::coalesced_threads();
  // 32-bit labels use the cheaper match.any.b32 form.
  using label_t = cuda::std::conditional_t<(sizeof(Key) <= 4), unsigned, unsigned long long>;
  const cg::coalesced_group peers = cg::labeled_partition(active, static_cast<label_t>(key));
  const T sum = cg::reduce(peers, value, cg::plus<T>());
  if (detail::orders_before(order)) peers.sync();
  if (peers.thread_rank() == 0) cuda::atomic_ref<T, Scope>(bins[key]).fetch_add(sum, order);
  if (detail::orders_after(order)) peers.sync();
#else
  cuda::atomic_ref<T, Scope>(bins[key]).fetch_add(value, order);
#endif
}

}  // namespace canopy::atomics
