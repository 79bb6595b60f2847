// SPDX-License-Identifier: Apache-2.0
// State shared by every worker of one scheduler (a block on the GPU, a thread on the CPU): the run's
// counters, the report to the host, the view of queues and graph every worker gets (scheduler_ref),
// termination (fail, stop, sinks), and claiming sources. Portable: compiles with g++ and nvcc.
#pragma once

#include <cuda/atomic>
#include <cstdint>
#include <type_traits>

#include "canopy/config.hpp"
#include "canopy/detail/queue.hpp"
#include "canopy/push_policy.hpp"
#include "canopy/status.hpp"
#include "canopy/task_graph.hpp"

namespace canopy::detail {

/// Node of the `mutex` mode's linked-list queue: allocated on push, freed on pop, as in the seed.
struct list_node {
  task_id task;
  list_node* next;
};

/// Per-run counters in device (or host) memory. On the GPU the run's last block to leave resets
/// them for the next run (end_of_run in run_lifecycle.cuh), after a failure the next run resets
/// them, and the queues, when it starts: so nothing is written by the host between runs, and runs
/// can be enqueued back to back or replayed from a captured CUDA graph. The CPU backend resets
/// its set before each run. Words that idle workers poll (`stop`, the source cursor, the locked
/// queue's count, the list head) each sit on their own 128-byte line: a thousand blocks polling
/// one line slow every other access to it, and to its L2 slice.
struct alignas(128) run_counters {
  alignas(128) std::int32_t stop;            // set once complete or failed: every worker leaves
  alignas(128) std::uint32_t source_cursor;  // next index into graph.sources to claim
  alignas(128) std::int32_t sinks_left;      // the run is complete when this reaches zero
  std::int32_t code;                         // canopy::status of the run, first failure wins
  task_id failed_task;                       // the task the failure concerns
  alignas(128) int tree_mutex;               // locked modes: guards every dependency counter
  alignas(128) int queue_mutex;              // locked modes: guards the global queue
  std::int32_t locked_head;                  // fixed-queue .. shared-queues: the mutex-guarded global ring
  alignas(128) std::int32_t locked_count;
  alignas(128) list_node* list_head;         // mutex mode
  list_node* list_tail;
  // GPU run lifecycle (run_lifecycle.cuh); unused by the CPU backend.
  alignas(128) std::uint32_t exited;  // blocks that have left this run: the last one ends it
  std::int32_t dirty;                 // the last run failed: the next one resets queues and counters first
  std::int32_t reported;              // the code the mapped report holds (a success clears only a failure)

  CANOPY_HD static run_counters initial(std::int32_t sinks) {
    run_counters c{};
    c.sinks_left = sinks;
    c.failed_task = no_task;
    return c;
  }
};

/// Result a run leaves for the host (mapped pinned memory on the GPU, so reading it after the
/// kernel needs no copy, and kernels enqueued after the run can read it too). Only a failure, and
/// the first success after one, write it (fail(), and end_of_run, with plain system-scope stores,
/// since read-modify-write atomics on mapped host memory are not atomic on every platform), so a
/// successful run after a successful run sends nothing over the bus. `abort_requested` is written
/// by the host while runs go on; the run that aborts clears it.
struct run_report {
  std::int32_t code;  // canopy::status
  std::int32_t task;
  std::int32_t abort_requested;
  std::int32_t pad;
};

struct scheduler_ref {
  task_graph_ref graph;
  ring_header* global_header;
  std::uint64_t* global_slots;
  task_id* locked_slots;  // the mutex-guarded global ring of the locked modes (same capacity)
  ring_header* shared_headers;
  std::uint64_t* shared_slots;
  std::int32_t shared_capacity;
  std::int32_t worker_count;
  std::int32_t private_capacity;
  std::int32_t source_chunk;  // sources claimed per fetch
  push_policy policy;
  run_counters* counters;
  std::int32_t shared_queue_count;  // shared queues allocated (>= worker_count): a failed run's reset covers them all
  run_report* report;
  std::uint64_t budget_ns;  // deadline, relative to each worker's start
  std::uint32_t idle_sleep_max_ns;  // GPU: cap of an idle block's exponential back-off between polls
  // GPU: the cap a block that has been idle for long may reach (idle_sleep_cap); equal to
  // idle_sleep_max_ns when the caller set the cap by hand.
  std::uint32_t idle_sleep_long_ns;
  // Sources [0, static_sources) are dealt without atomics: worker w takes [w * source_chunk,
  // +source_chunk) of them on its first fetch (GPU block modes; dealt_from). The cursor counts the
  // claims after them. static_sources <= source_count; it may end inside a worker's chunk.
  std::uint32_t static_sources;
  // GPU block modes: the most tasks a block's master fetches at once in this run (run_batch_max);
  // unused by the CPU backend.
  std::int32_t batch_max;

  // Host: the graph launcher updates a cached launch's parameters only when this changed.
  friend bool operator==(const scheduler_ref&, const scheduler_ref&) = default;

  template <cuda::thread_scope S>
  CANOPY_HD ring_ref<S> global_ring() const { return ring_ref<S>{global_header, global_slots}; }
  template <cuda::thread_scope S>
  CANOPY_HD ring_ref<S> shared_ring(int worker) const {
    return ring_ref<S>{shared_headers + worker, shared_slots + static_cast<std::int64_t>(worker) * shared_capacity};
  }
};
static_assert(std::is_trivially_copyable_v<scheduler_ref>);

/// Records the first failure of a run and tells every worker to stop.
template <cuda::thread_scope S>
CANOPY_HD void fail(const scheduler_ref& r, status code, task_id t) {
  cuda::atomic_ref<std::int32_t, S> c(r.counters->code);
  std::int32_t expected = 0;
  if (c.compare_exchange_strong(expected, static_cast<std::int32_t>(code), cuda::std::memory_order_relaxed)) {
    cuda::atomic_ref<task_id, S>(r.counters->failed_task).store(t, cuda::std::memory_order_relaxed);
    // The host reads the report after the run (on the GPU: mapped host memory, read after the
    // kernel has completed).
    cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(r.report->task).store(t, cuda::std::memory_order_relaxed);
    cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(r.report->code).store(static_cast<std::int32_t>(code),
                                                                                    cuda::std::memory_order_relaxed);
  }
  cuda::atomic_ref<std::int32_t, S>(r.counters->stop).store(1, cuda::std::memory_order_release);
}

template <cuda::thread_scope S>
CANOPY_HD bool should_stop(const scheduler_ref& r) {
  return cuda::atomic_ref<std::int32_t, S>(r.counters->stop).load(cuda::std::memory_order_acquire) != 0;
}

/// The host's abort flag. On the GPU it lives in mapped host memory: every read crosses PCIe, so
/// workers check it only while idle, and only now and then.
CANOPY_HD inline bool abort_requested(const scheduler_ref& r) {
  return cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(r.report->abort_requested)
             .load(cuda::std::memory_order_relaxed) != 0;
}

/// Every sink has finished (the run is complete, whatever a late poller thinks of the deadline).
template <cuda::thread_scope S>
CANOPY_HD bool run_complete(const scheduler_ref& r) {
  return cuda::atomic_ref<std::int32_t, S>(r.counters->sinks_left).load(cuda::std::memory_order_acquire) <= 0;
}

/// A sink finished: the last one ends the run. A graph with one sink (a tree: its root) skips the
/// count's round trip (an L2 atomic the whole grid would wait for before it sees `stop`).
template <cuda::thread_scope S>
CANOPY_HD void sink_finished(const scheduler_ref& r) {
  cuda::atomic_ref<std::int32_t, S> left(r.counters->sinks_left);
  if (r.graph.sink_count == 1) left.store(0, cuda::std::memory_order_relaxed);
  else if (left.fetch_sub(1, cuda::std::memory_order_acq_rel) != 1) return;
  cuda::atomic_ref<std::int32_t, S>(r.counters->stop).store(1, cuda::std::memory_order_release);
}

/// How many of the sources [first, first + max) exist (0 when first is past the last one).
CANOPY_HD inline int sources_from(const scheduler_ref& r, std::uint32_t first, int max) {
  const auto total = static_cast<std::uint32_t>(r.graph.source_count);
  if (first >= total) return 0;
  return static_cast<int>(total - first < static_cast<std::uint32_t>(max) ? total - first : static_cast<std::uint32_t>(max));
}

/// How many of the dealt sources [first, first + max) exist: sources_from, ending at static_sources.
CANOPY_HD inline int dealt_from(const scheduler_ref& r, std::uint32_t first, int max) {
  if (first >= r.static_sources) return 0;
  const std::uint32_t left = r.static_sources - first;
  return static_cast<int>(left < static_cast<std::uint32_t>(max) ? left : static_cast<std::uint32_t>(max));
}

/// Claims up to `max` consecutive sources with one atomic: graph.sources[*first .. *first + n),
/// n returned. The cursor is read first so that idle workers polling an exhausted range do not
/// keep incrementing it (`look` = false skips that on a worker's first claim of a run, when the
/// range is most likely not exhausted).
template <cuda::thread_scope S>
CANOPY_HD int claim_source_range(const scheduler_ref& r, int max, bool look, std::uint32_t* first) {
  cuda::atomic_ref<std::uint32_t, S> cursor(r.counters->source_cursor);
  const auto total = static_cast<std::uint32_t>(r.graph.source_count);
  if (max <= 0 || (look && r.static_sources + cursor.load(cuda::std::memory_order_relaxed) >= total)) return 0;
  const std::uint32_t f = r.static_sources + cursor.fetch_add(static_cast<std::uint32_t>(max), cuda::std::memory_order_relaxed);
  const int n = sources_from(r, f, max);
  if (n > 0) *first = f;
  return n;
}

/// claim_source_range, copying the claimed ids to out.
template <cuda::thread_scope S>
CANOPY_HD int claim_sources(const scheduler_ref& r, task_id* out, int max, bool look = true) {
  std::uint32_t first = 0;
  const int n = claim_source_range<S>(r, max, look, &first);
  for (int i = 0; i < n; ++i) out[i] = r.graph.sources[first + static_cast<std::uint32_t>(i)];
  return n;
}

}  // namespace canopy::detail
