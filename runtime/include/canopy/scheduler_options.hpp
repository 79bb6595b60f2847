// Options shared by both backends.
#pragma once

#include <chrono>
#include <cstdint>

#include "canopy/mode.hpp"

namespace canopy {

struct scheduler_options {
  canopy::mode mode = canopy::mode::continuation;
  push_policy policy = push_policy::round_robin;
  /// GPU: blocks of the persistent kernel, 0 = as many as can be co-resident (asking for more is
  /// an invalid_argument error, never a hang). CPU: worker threads, 0 = hardware threads.
  int blocks = 0;
  int threads_per_block = 128;         ///< GPU only: a multiple of 32, at most 1024 (128: measured best on an H100, bench/RESULTS.md)
  std::int32_t global_queue_capacity = 0;  ///< 0 = the task count (enough for any run)
  std::int32_t shared_queue_capacity = 0;  ///< per block; 0 = 1024
  std::int32_t private_queue_capacity = 0; ///< per block, in shared memory; 0 = 256
  /// A run that has not finished by then stops with status::timeout naming a stuck task.
  std::chrono::milliseconds deadline{10000};
  /// GPU only: the longest an idle block sleeps between two looks at the queues, at most 1 ms;
  /// 0 = automatic (4 ns per block of the grid, 2-64 us: the polling of a full grid must not starve
  /// the blocks that work; see detail::auto_idle_sleep_ns).
  std::chrono::nanoseconds idle_sleep_max{0};
  /// GPU only: launch the persistent kernel through a cached one-node CUDA graph (a cooperative
  /// kernel node) instead of cudaLaunchCooperativeKernel. Same kernel, same stream order. On an
  /// H100 it took 2.8 us off a run's launch and wait when the graph's parameters were unchanged
  /// (same Ops bytes, options, grid), 1.2 us when they had to be updated; the first run of each
  /// mode and grid builds the graphs (bench/RESULTS.md, sixth session; detail/graph_launch.cuh).
  bool graph_launch = true;
};

namespace detail {
inline constexpr std::int32_t default_shared_capacity = 1024;
inline constexpr std::int32_t default_private_capacity = 256;
inline constexpr int max_threads_per_block = 1024;
}  // namespace detail

}  // namespace canopy
