// SPDX-License-Identifier: Apache-2.0
// Block-level aggregation through shared memory (seed 000, and seed 003's filter_shared_k): the
// threads of a block combine their contributions with shared-memory atomics, then one thread
// issues a single global atomic for the whole block and every thread derives its own offset.
//
// CUB-style collective: the caller places TempStorage in its own __shared__ memory, every thread
// of the block calls the same member function (it contains __syncthreads), and a __syncthreads()
// is needed before the same TempStorage is reused for something else.
//
//   __shared__ canopy::atomics::block_aggregate<unsigned>::TempStorage temp;
//   cuda::atomic_ref<unsigned, cuda::thread_scope_device> count(*d_count);
//   unsigned slot = canopy::atomics::block_aggregate<unsigned>(temp).increment_if(
//       keep, count, cuda::std::memory_order_relaxed);
//
// Portable: in host code a "block" is the calling thread (the CPU backend runs one std::thread per
// block), TempStorage is unused and each call is one plain atomic on the counter.
#pragma once

#include <cuda/atomic>
#include <cuda/std/type_traits>

#include "canopy/config.hpp"

#if defined(__CUDACC__)
#include <cooperative_groups.h>

#include "canopy/atomics/detail/warp_sync.cuh"
#endif

namespace canopy::atomics {

template <class T>
class block_aggregate {
  static_assert(cuda::std::is_integral_v<T>, "block_aggregate hands out offsets: integral types only");

 public:
  /// Shared-memory state of one collective call. Place it in __shared__ memory.
  struct TempStorage {
    T block_total;  // sum of the block's contributions (shared-memory atomics)
    T block_base;   // what the global counter held before the block's single atomic
  };

  CANOPY_HD explicit block_aggregate(TempStorage& storage) : storage_(storage) {}

  /// Every thread of the block calls with its own `value` (>= 0, may be 0). One global atomic
  /// per block (none if the block's sum is 0). Returns the thread's exclusive offset: it owns
  /// [result, result + value). Offsets inside a block follow shared-atomic arrival order, not
  /// thread order. When the block's sum is 0 the result is T{}.
  template <class Ref>
  CANOPY_HD T fetch_add(T value, Ref counter, cuda::std::memory_order order) {
    static_assert(cuda::std::is_same_v<typename Ref::value_type, T>, "counter must hold T");
#if CANOPY_DEVICE_CODE
    const cooperative_groups::thread_block block = cooperative_groups::this_thread_block();
    detail::block_shared_init(block, storage_.block_total, T{});
    T local{};
    // Block scope, relaxed: the surrounding barriers order everything; this only counts.
    if (value != T{})
      local = cuda::atomic_ref<T, cuda::thread_scope_block>(storage_.block_total)
                  .fetch_add(value, cuda::std::memory_order_relaxed);
    // __syncthreads orders every thread's earlier writes before thread 0's global atomic, so a
    // release (or acquire) order requested by the caller covers the whole block.
    block.sync();
    if (block.thread_rank() == 0) {
      const T total = storage_.block_total;
      storage_.block_base = total == T{} ? T{} : counter.fetch_add(total, order);
    }
    block.sync();
    return static_cast<T>(storage_.block_base + local);
#else
    (void)storage_;
    if (value == T{}) return T{};
    return counter.fetch_add(value, order);
#endif
  }

  /// fetch_add of 1 for threads with `keep`, 0 for the others: a distinct slot index for every
  /// thread that keeps something (stream compaction), one global atomic per block.
  template <class Ref>
  CANOPY_HD T increment_if(bool keep, Ref counter, cuda::std::memory_order order) {
    return fetch_add(keep ? T{1} : T{}, counter, order);
  }

 private:
  TempStorage& storage_;
};

}  // namespace canopy::atomics
