// SPDX-License-Identifier: Apache-2.0
// Hierarchical maximum (seed 002, the "smarter" approach): a block first combines its values in
// shared memory (warp reduction, then one shared-memory atomic max per warp), then one thread
// issues a single global atomic max for the whole block. Global atomics drop from one per thread
// to one per block.
//
// CUB-style collective: TempStorage in the caller's __shared__ memory; every thread of the block
// calls update(); __syncthreads() before reusing the TempStorage.
//
//   __shared__ canopy::atomics::hierarchical_max<int>::TempStorage temp;
//   cuda::atomic_ref<int, cuda::thread_scope_device> global_max(*d_max);
//   canopy::atomics::hierarchical_max<int>(temp).update(v, global_max, cuda::std::memory_order_relaxed);
//
// Threads with nothing to contribute pass cuda::std::numeric_limits<T>::lowest().
// Portable: in host code a "block" is the calling thread: one plain fetch_max per call.
#pragma once

#include <cuda/atomic>
#include <cuda/std/limits>
#include <cuda/std/type_traits>

#include "canopy/config.hpp"

#if defined(__CUDACC__)
#include <cooperative_groups.h>

#include "canopy/atomics/detail/warp_sync.cuh"
#include <cooperative_groups/reduce.h>
#endif

namespace canopy::atomics {

template <class T>
class hierarchical_max {
  // cuda::atomic_ref::fetch_max is defined for integral types (and pointers); floats would need a
  // CAS loop or the order-preserving integer encoding, which callers can apply themselves.
  static_assert(cuda::std::is_integral_v<T>, "hierarchical_max: integral types only");

 public:
  struct TempStorage {
    T block_max;
  };

  CANOPY_HD explicit hierarchical_max(TempStorage& storage) : storage_(storage) {}

  /// Folds every thread's `value` into `global` (one global atomic max per block) and returns
  /// the block's maximum to every thread of the block.
  template <class Ref>
  CANOPY_HD T update(T value, Ref global, cuda::std::memory_order order) {
    static_assert(cuda::std::is_same_v<typename Ref::value_type, T>, "global must hold T");
#if CANOPY_DEVICE_CODE
    namespace cg = cooperative_groups;
    const cg::thread_block block = cg::this_thread_block();
    detail::block_shared_init(block, storage_.block_max, cuda::std::numeric_limits<T>::lowest());
    {
      // redux.sync on sm_80+ for 32-bit types: one instruction instead of 32 shared atomics.
      const cg::coalesced_group warp = cg::coalesced_threads();
      const T warp_max = cg::reduce(warp, value, cg::greater<T>());
      if (warp.thread_rank() == 0)
        cuda::atomic_ref<T, cuda::thread_scope_block>(storage_.block_max)
            .fetch_max(warp_max, cuda::std::memory_order_relaxed);
    }
    block.sync();
    const T result = storage_.block_max;
    if (block.thread_rank() == 0) global.fetch_max(result, order);
    return result;
#else
    (void)storage_;
    global.fetch_max(value, order);
    return value;
#endif
  }

 private:
  TempStorage& storage_;
};

}  // namespace canopy::atomics
