// SPDX-License-Identifier: Apache-2.0
// Options shared by both backends.
#pragma once

#include <chrono>
#include <cstdint>

#include "canopy/mode.hpp"
#include "canopy/push_policy.hpp"

namespace canopy {

struct scheduler_options {
  canopy::mode mode = canopy::mode::continuation;
  push_policy policy = push_policy::round_robin;
  /// GPU: blocks of the persistent kernel, 0 = as many as can be co-resident (asking for more is
  /// an invalid_argument error, never a hang). CPU: worker threads, 0 = hardware threads.
  int blocks = 0;
  /// GPU only: a multiple of 32, at most 1024. Small blocks keep more blocks resident, so more
  /// masters fetch at once.
  int threads_per_block = 128;
  std::int32_t global_queue_capacity = 0;  ///< 0 = the task count (enough for any run)
  std::int32_t shared_queue_capacity = 0;  ///< per block; 0 = 1024
  std::int32_t private_queue_capacity = 0; ///< per block, in shared memory; 0 = 256
  /// A run that has not finished by then stops with status::timeout naming a stuck task. GPU:
  /// counted from the persistent kernel's start on the device (time spent waiting for SMs that
  /// other kernels hold is not part of it); CPU: from the call.
  std::chrono::milliseconds deadline{10000};
  /// GPU only: the longest an idle block sleeps between two looks at the queues, at most 1 ms;
  /// 0 = automatic (grows with the grid, so that a full grid's polling does not starve the blocks
  /// that work, see detail::auto_idle_sleep_ns; and for a block idle for long, with its idle time,
  /// up to 64 us, see detail::idle_sleep_cap). Set by hand, it is the cap however long a block has
  /// been idle.
  std::chrono::nanoseconds idle_sleep_max{0};
  /// GPU only: launch the persistent kernel through a cached one-node CUDA graph (a cooperative
  /// kernel node) instead of cudaLaunchCooperativeKernel. Same kernel, same stream order; a graph
  /// launch costs the driver less work than a cooperative launch when its parameters are unchanged
  /// (same Ops bytes, options and grid). The first run of each mode and grid builds the graphs
  /// (detail/graph_launch.cuh).
  bool graph_launch = true;
  /// GPU block modes: how many of the graph's first sources are dealt out when a run starts, in
  /// the chunks a block's first batch takes (the first blocks get them); -1 = all of them (as many
  /// as the blocks' first batches hold). The rest are claimed in the graph's order by workers that
  /// look for work; in warp_rounds on a DAG a lane group claims one at a time, and only after its
  /// own block's queue, the global queue and one steal came back empty. A DAG whose sources are of
  /// two sorts lists the urgent ones first and deals only those: the FMM deals its leaves' up
  /// tasks, which start its critical path, and leaves its p2p tasks, listed longest first, to fill
  /// the time the groups would otherwise wait (trees/fmm/.../task_dag.hpp).
  std::int32_t dealt_sources = -1;
};

}  // namespace canopy
