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

}  // namespace canopy::atomics::detail
