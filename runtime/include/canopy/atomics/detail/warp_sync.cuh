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

constexpr bool orders_before(cuda::std::memory_order order) {
  return order == cuda::std::memory_order_release || order == cuda::std::memory_order_acq_rel ||
         order == cuda::std::memory_order_seq_cst;
}

constexpr bool orders_after(cuda::std::memory_order order) {
  return order == cuda::std::memory_order_acquire || order == cuda::std::memory_order_consume ||
         order == cuda::std::memory_order_acq_rel || order == cuda::std::memory_order_seq_cst;
}

// One lane performs the atomic on behalf of the others, so a release by the leader alone would
// publish only the leader's own writes and an acquire would order only the leader's later reads.
// __syncwarp orders memory among the lanes it synchronises, so a barrier before the leader's
// release (and after its acquire) extends the requested order to every participating lane.
// Relaxed counters, the common case, pay nothing.
__device__ __forceinline__ void fence_before(unsigned mask, cuda::std::memory_order order) {
  if (orders_before(order)) __syncwarp(mask);
}

__device__ __forceinline__ void fence_after(unsigned mask, cuda::std::memory_order order) {
  if (orders_after(order)) __syncwarp(mask);
}

}  // namespace canopy::atomics::detail
