// SPDX-License-Identifier: Apache-2.0
// What every part of the persistent kernel shares: the scope of its atomics, the device clock, and
// the block's dynamic shared memory.
#pragma once

#include <cuda/atomic>
#include <cstddef>
#include <cstdint>

#include "canopy/config.hpp"

namespace canopy::detail {

inline constexpr cuda::thread_scope device_scope = cuda::thread_scope_device;

/// Nanoseconds of the GPU's global timer (the same clock on every SM: deadlines, idle sleep caps).
__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Dynamic shared memory of one block: the batch, the staging area for tasks made ready, and the
/// private queue.
__host__ __device__ constexpr std::size_t kernel_shared_bytes(int threads, int private_capacity) {
  return sizeof(task_id) * (2 * static_cast<std::size_t>(threads) + static_cast<std::size_t>(private_capacity));
}

}  // namespace canopy::detail
