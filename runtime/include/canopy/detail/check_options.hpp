// SPDX-License-Identifier: Apache-2.0
// Checking and resolving scheduler_options, once for both backends.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "canopy/scheduler_options.hpp"
#include "canopy/status.hpp"

namespace canopy::detail {

inline constexpr std::int32_t default_shared_capacity = 1024;
inline constexpr std::int32_t default_private_capacity = 256;
inline constexpr int max_threads_per_block = 1024;
/// CPU backend: the most worker threads (`blocks`) a scheduler starts. More were never faster than
/// the cores, and 100,000 made the system refuse threads: refused before any thread starts.
inline constexpr int max_cpu_workers = 4096;

/// Queue capacities with the defaults resolved (0 = default).
struct queue_capacities {
  std::int32_t global = 1, shared = 1, priv = 1;
};

/// Throws canopy::error(status::invalid_argument), the message starting with `backend` ("gpu
/// backend", "cpu backend"), when `o` is not valid; the GPU-only fields are checked for the GPU.
inline void check_options(const scheduler_options& o, const char* backend, bool gpu) {
  const std::string who(backend);
  auto fail = [&](const std::string& what) { throw error(status::invalid_argument, who + ": " + what); };
  if (!is_valid(o.mode)) fail("unknown mode " + std::to_string(static_cast<int>(o.mode)));
  if (!is_valid(o.policy)) fail("unknown push policy " + std::to_string(static_cast<int>(o.policy)));
  if (o.blocks < 0) fail("blocks must be >= 0");
  if (o.global_queue_capacity < 0 || o.shared_queue_capacity < 0 || o.private_queue_capacity < 0)
    fail("queue capacities must be >= 0 (0 = default)");
  if (o.deadline.count() <= 0) fail("deadline must be positive");
  if (o.dealt_sources < -1) fail("dealt sources must be >= 0, or -1 for all, not " + std::to_string(o.dealt_sources));
  if (!gpu && o.blocks > max_cpu_workers)
    fail("at most " + std::to_string(max_cpu_workers) + " worker threads (blocks), not " + std::to_string(o.blocks));
  if (!gpu) return;
  if (o.threads_per_block < 32 || o.threads_per_block > max_threads_per_block || o.threads_per_block % 32 != 0)
    fail("threads per block must be a multiple of 32 in 32..1024, not " + std::to_string(o.threads_per_block));
  if (o.idle_sleep_max.count() < 0 || o.idle_sleep_max > std::chrono::milliseconds(1))
    fail("idle sleep cap must be in 0..1 ms (0 = automatic)");
}

/// A queue never holds more than every task at once, so a capacity above the task count is capped
/// at it: the queues are allocated at this size, and 2^31 - 1 asked for a 2,000-task tree used to
/// allocate (and zero) gigabytes until the OOM killer ended the process.
inline queue_capacities resolve_capacities(const scheduler_options& o, std::int32_t task_count) {
  const std::int32_t all = std::max<std::int32_t>(1, task_count);
  return queue_capacities{o.global_queue_capacity > 0 ? std::min(o.global_queue_capacity, all) : all,
                          o.shared_queue_capacity > 0 ? std::min(o.shared_queue_capacity, all) : default_shared_capacity,
                          o.private_queue_capacity > 0 ? o.private_queue_capacity : default_private_capacity};
}

}  // namespace canopy::detail
