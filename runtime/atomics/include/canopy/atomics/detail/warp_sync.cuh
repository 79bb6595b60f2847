// SPDX-License-Identifier: Apache-2.0
// Device-only building blocks shared by the aggregated atomics (nvcc only).
#pragma once

#if !defined(__CUDACC__)
#error "canopy/atomics/detail/warp_sync.cuh needs nvcc; include the portable canopy/atomics/*.hpp instead"
#endif

#include <cuda/atomic>

namespace canopy::atomics::detail {

__device__ __forceinline__ unsigned lane_id() {
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

__device__ __forceinline__ unsigned lanemask_lt() {
  unsigned mask;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(mask));
  return mask;
}

// One lane performs the atomic on behalf of the others, so a release by the leader alone would
// publish only the leader's own writes and an acquire would order only the leader's later reads.
// A warp barrier (__syncwarp / coalesced_group::sync) orders memory among the lanes it
// synchronises, so the aggregated functions put one before the leader's atomic when the order
// releases and one after it when the order acquires. Relaxed counters, the common case, pay nothing.
__host__ __device__ constexpr bool orders_before(cuda::std::memory_order order) {
  return order == cuda::std::memory_order_release || order == cuda::std::memory_order_acq_rel ||
         order == cuda::std::memory_order_seq_cst;
}

__host__ __device__ constexpr bool orders_after(cuda::std::memory_order order) {
  return order == cuda::std::memory_order_acquire || order == cuda::std::memory_order_consume ||
         order == cuda::std::memory_order_acq_rel || order == cuda::std::memory_order_seq_cst;
}

/// The block's first thread sets a shared-memory `slot` to `init`; every thread waits for it.
template <class Block, class T>
__device__ __forceinline__ void block_shared_init(const Block& block, T& slot, T init) {
  if (block.thread_rank() == 0) slot = init;
  block.sync();
}

/// The atomic on behalf of a converged group (a cooperative_groups::coalesced_group): its first
/// lane adds `total` to `counter`, with the barriers `order` needs (above), and every lane gets
/// the value the counter had before.
template <class Group, class Ref>
__device__ __forceinline__ typename Ref::value_type group_leader_fetch_add(const Group& active, Ref counter,
                                                                           typename Ref::value_type total,
                                                                           cuda::std::memory_order order) {
  typename Ref::value_type base{};
  if (orders_before(order)) active.sync();
  if (active.thread_rank() == 0) base = counter.fetch_add(total, order);
  base = active.shfl(base, 0);
  if (orders_after(order)) active.sync();
  return base;
}

}  // namespace canopy::atomics::detail
