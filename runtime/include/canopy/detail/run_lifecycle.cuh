// SPDX-License-Identifier: Apache-2.0
// How a GPU run starts and ends without the host: the run's last block to leave resets the counters
// for the next run; a failed run leaves them, and the queues it filled, for the next run to reset
// when it starts (after the host has had the chance to read them: the timeout diagnosis reads the
// dependency counters). So the host writes nothing between runs, runs can be enqueued back to back
// on a stream, and a run captured into a CUDA graph is correct on every replay.
#pragma once

#include <cooperative_groups.h>

#include <cuda/atomic>
#include <cstdint>

#include "canopy/detail/kernel_common.cuh"
#include "canopy/detail/scheduler_state.hpp"

namespace canopy::detail {

/// What a failed run left, reset by the whole grid before any block starts work: dependency
/// counters, queues, counters, the mutex mode's list. Out of line: inlined, its loops and the grid
/// barrier raised the spills of every kernel's task loop at the 64-register cap (the loop runs
/// millions of times, this at most once per failure).
inline __device__ __noinline__ void reset_after_failure(const scheduler_ref& r) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t i = first; i < r.graph.task_count; i += stride) r.graph.pending[i] = r.graph.dependency_count[i];
  const std::int32_t global_capacity = r.global_header->capacity;  // written once, by the host
  for (std::int64_t i = first; i < global_capacity; i += stride) r.global_slots[i] = 0;
  const std::int64_t shared_words = static_cast<std::int64_t>(r.shared_queue_count) * r.shared_capacity;
  for (std::int64_t i = first; i < shared_words; i += stride) r.shared_slots[i] = 0;
  for (std::int64_t i = first; i < r.shared_queue_count; i += stride) r.shared_headers[i] = ring_header::empty(r.shared_capacity);
  if (first == 0) {
    *r.global_header = ring_header::empty(global_capacity);
    run_counters& c = *r.counters;
    for (list_node* n = c.list_head; n != nullptr;) {  // the mutex mode's nodes, from the device heap
      list_node* next = n->next;
      free(n);
      n = next;
    }
    const std::int32_t reported = c.reported;
    c = run_counters::initial(r.graph.sink_count);
    c.dirty = 1;  // cleared after the barrier: a block that has not read it yet must still see it set
    c.reported = reported;
  }
  cooperative_groups::this_grid().sync();
  if (first == 0) r.counters->dirty = 0;  // every block has read the flag; the next kernel sees this
}

/// Entering a run, every block: if the previous run failed, the whole grid resets what it left
/// (reset_after_failure). The flag is read once per block and written only by the previous kernel
/// (set) and, after the grid barrier, by block 0 (cleared), so every block takes the same branch.
/// Costs a successful run one load per block.
__device__ inline void begin_run(const scheduler_ref& r) {
  __shared__ int s_dirty;
  if (threadIdx.x == 0) s_dirty = cuda::atomic_ref<std::int32_t, device_scope>(r.counters->dirty).load(cuda::std::memory_order_relaxed);
  __syncthreads();
  if (s_dirty) reset_after_failure(r);
}

/// The run's last block out ends it. After a success the queues are empty and the dependency
/// counters back at their counts (each last arriver restores its counter), so it only rewinds the
/// run's counters, and clears the report if it still holds a failure. After a failure it marks the
/// state dirty for the next run (begin_run) and, if the host's abort ended it, clears the host's
/// request. Out of line for the same reason as reset_after_failure.
inline __device__ __noinline__ void close_run(const scheduler_ref& r) {
  run_counters& c = *r.counters;
  c.exited = 0;
  if (c.code == 0) {
    c.stop = 0;
    c.source_cursor = 0;
    c.sinks_left = r.graph.sink_count;
    if (c.reported != 0) {
      cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(r.report->task).store(no_task, cuda::std::memory_order_relaxed);
      cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(r.report->code).store(0, cuda::std::memory_order_relaxed);
      c.reported = 0;
    }
  } else {
    c.dirty = 1;
    c.reported = c.code;  // fail() has written the report
    if (c.code == static_cast<std::int32_t>(status::aborted))
      cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(r.report->abort_requested).store(0, cuda::std::memory_order_relaxed);
  }
}

/// Leaving a run, every block once all its threads are done: the last block to leave closes the
/// run. A block touches no counter after its increment of `exited`, so the last one owns them all.
__device__ inline void end_of_run(const scheduler_ref& r) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  cuda::atomic_ref<std::uint32_t, device_scope> exited(r.counters->exited);
  if (exited.fetch_add(1, cuda::std::memory_order_acq_rel) + 1 == gridDim.x) close_run(r);
}

}  // namespace canopy::detail
