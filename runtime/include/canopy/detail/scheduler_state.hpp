// State shared by every worker of one scheduler (a block on the GPU, a thread on the CPU), and the
// portable pieces of the worker loop: claiming sources, fetching a batch in pop order (private,
// own shared, sources, global), pushing in push order (private, shared by policy, global), and
// the `mutex` mode's allocated linked-list queue.
#pragma once

#include <cuda/atomic>
#include <cstdint>
#include <type_traits>

#include "canopy/config.hpp"
#include "canopy/dependency.hpp"
#include "canopy/mode.hpp"
#include "canopy/push_policy.hpp"
#include "canopy/queue.hpp"
#include "canopy/spin_mutex.hpp"
#include "canopy/status.hpp"
#include "canopy/task_graph.hpp"

#if !CANOPY_DEVICE_CODE
#include <new>
#endif

namespace canopy::detail {

/// Node of the `mutex` mode's linked-list queue: allocated on push, freed on pop, as in the seed.
struct list_node {
  task_id task;
  list_node* next;
};

/// Per-run counters in device (or host) memory. The last worker to leave a run resets them, so
/// consecutive runs need no memset. Words that idle workers poll (`stop`, the source cursor, the
/// locked queue's count, the list head) each sit on their own 128-byte line: on an H100 a
/// thousand blocks polling one line slowed every other access to it, and to its L2 slice, by
/// orders of magnitude.
struct alignas(128) run_counters {
  alignas(128) std::int32_t stop;            // set once complete or failed: every worker leaves
  alignas(128) std::uint32_t source_cursor;  // next index into graph.sources to claim
  alignas(128) std::int32_t sinks_left;      // the run is complete when this reaches zero
  std::int32_t workers_left;                 // unused by the kernel since runs alternate counter sets
  std::int32_t code;                         // canopy::status of the run, first failure wins
  task_id failed_task;                       // the task the failure concerns
  alignas(128) int tree_mutex;               // locked modes: guards every dependency counter
  alignas(128) int queue_mutex;              // locked modes: guards the global queue
  std::int32_t locked_head;                  // fixed-queue .. shared-queues: the mutex-guarded global ring
  alignas(128) std::int32_t locked_count;
  alignas(128) list_node* list_head;         // mutex mode
  list_node* list_tail;

  static run_counters initial(std::int32_t sinks, std::int32_t workers) {
    run_counters c{};
    c.sinks_left = sinks;
    c.workers_left = workers;
    c.failed_task = no_task;
    return c;
  }
};

/// Result a run leaves for the host (mapped pinned memory on the GPU, so reading it after the
/// kernel needs no copy). The host clears it before a run; only a failure writes it (fail(), with
/// plain system-scope stores, since read-modify-write atomics on mapped host memory are not atomic
/// on every platform), so a successful run sends nothing over the bus. `abort_requested` is
/// written by the host while the run goes on.
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
  run_counters* next_counters;  // GPU: the next run's counters, reset during this run (else nullptr)
  run_report* report;
  std::uint64_t budget_ns;  // deadline, relative to each worker's start
  std::uint32_t idle_sleep_max_ns;  // GPU: cap of an idle block's exponential back-off between polls
  // Sources [0, static_sources) are dealt without atomics: worker w takes [w * source_chunk,
  // +source_chunk) on its first fetch (GPU block modes). The cursor counts the claims after them.
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
    // kernel has completed). A successful run writes nothing there: the host clears it first.
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

// ---- the locked global ring (modes fixed-queue .. shared-queues) ----------------------------
// Guarded by queue_mutex. The count is also read without the lock, so that idle workers look
// before they queue up for the mutex (otherwise a thousand idle blocks keep the lock busy and the
// one block with work waits behind them); hence atomic (relaxed) accesses to it.

template <cuda::thread_scope S>
CANOPY_HD int locked_push(const scheduler_ref& r, const task_id* in, int n) {
  spin_mutex_ref<S> m{&r.counters->queue_mutex};
  scoped_lock lock(m);
  cuda::atomic_ref<std::int32_t, S> count(r.counters->locked_count);
  local_ring ring{r.locked_slots, r.global_header->capacity, r.counters->locked_head, count.load(cuda::std::memory_order_relaxed)};
  const int k = ring.try_push(in, n);
  count.store(ring.count, cuda::std::memory_order_relaxed);
  return k;
}

template <cuda::thread_scope S>
CANOPY_HD int locked_pop(const scheduler_ref& r, task_id* out, int max) {
  cuda::atomic_ref<std::int32_t, S> count(r.counters->locked_count);
  if (count.load(cuda::std::memory_order_relaxed) == 0) return 0;
  spin_mutex_ref<S> m{&r.counters->queue_mutex};
  scoped_lock lock(m);
  local_ring ring{r.locked_slots, r.global_header->capacity, r.counters->locked_head, count.load(cuda::std::memory_order_relaxed)};
  const int k = ring.try_pop(out, max);
  r.counters->locked_head = ring.head;
  count.store(ring.count, cuda::std::memory_order_relaxed);
  return k;
}

// ---- the mutex mode's linked list -----------------------------------------------------------

template <cuda::thread_scope S>
CANOPY_HD bool list_push(const scheduler_ref& r, task_id t) {
#if CANOPY_DEVICE_CODE
  auto* node = static_cast<list_node*>(malloc(sizeof(list_node)));
#else
  auto* node = new (std::nothrow) list_node;
#endif
  if (node == nullptr) return false;
  node->task = t;
  node->next = nullptr;
  spin_mutex_ref<S> m{&r.counters->queue_mutex};
  scoped_lock lock(m);
  if (r.counters->list_tail != nullptr) r.counters->list_tail->next = node;
  else cuda::atomic_ref<list_node*, S>(r.counters->list_head).store(node, cuda::std::memory_order_relaxed);
  r.counters->list_tail = node;
  return true;
}

template <cuda::thread_scope S>
CANOPY_HD bool list_pop(const scheduler_ref& r, task_id& t) {
  // Look before queueing for the mutex (see locked_pop); head is read atomically for that.
  cuda::atomic_ref<list_node*, S> head(r.counters->list_head);
  if (head.load(cuda::std::memory_order_relaxed) == nullptr) return false;
  list_node* node;
  {
    spin_mutex_ref<S> m{&r.counters->queue_mutex};
    scoped_lock lock(m);
    node = head.load(cuda::std::memory_order_relaxed);
    if (node != nullptr) {
      head.store(node->next, cuda::std::memory_order_relaxed);
      if (node->next == nullptr) r.counters->list_tail = nullptr;
    }
  }
  if (node == nullptr) return false;
  t = node->task;
#if CANOPY_DEVICE_CODE
  free(node);
#else
  delete node;
#endif
  return true;
}

/// Frees whatever a failed mutex-mode run left in its list (host side of the CPU backend).
inline void list_clear_host(run_counters& c) {
#if !CANOPY_DEVICE_CODE
  while (c.list_head != nullptr) {
    list_node* n = c.list_head;
    c.list_head = n->next;
    delete n;
  }
  c.list_tail = nullptr;
#else
  (void)c;
#endif
}

// ---- batch fetch and push in the ring-based modes --------------------------------------------

/// Fetches up to max tasks in pop order: private, own shared, sources, global. With
/// `sources_first` (a worker's first fetch of a run, when every queue is known to be empty) the
/// sources are tried before the queues, saving the queues' round trips.
template <cuda::thread_scope S, mode M>
CANOPY_HD int fetch_batch(const scheduler_ref& r, int worker, local_ring* priv, task_id* out, int max,
                          bool sources_first = false) {
  constexpr mode_traits T = traits_of(M);
  int n = 0;
  if (sources_first) n = claim_sources<S>(r, out, max < r.source_chunk ? max : r.source_chunk, false);
  if (n > 0) return n;
  if constexpr (T.private_queues) n += priv->try_pop(out, max);
  if constexpr (T.shared_queues)
    if (n < max) n += r.shared_ring<S>(worker).try_pop(out + n, max - n);
  if (n < max) n += claim_sources<S>(r, out + n, (max - n) < r.source_chunk ? (max - n) : r.source_chunk);
  if (n < max) {
    if constexpr (T.lockfree_global) n += r.global_ring<S>().try_pop(out + n, max - n);
    else n += locked_pop<S>(r, out + n, max - n);
  }
  return n;
}

/// Pushes up to n ready tasks in push order: private, a shared queue (own, or picked by the
/// policy), global. Returns how many found room (in order: in[0 .. returned) are queued).
template <cuda::thread_scope S, mode M>
CANOPY_HD int push_some(const scheduler_ref& r, int worker, local_ring* priv, std::uint32_t& tick, const task_id* in,
                        int n) {
  constexpr mode_traits T = traits_of(M);
  int done = 0;
  if constexpr (T.private_queues) done += priv->try_push(in, n);
  if constexpr (T.shared_queues) {
    if constexpr (T.balanced_push) {
      for (int attempt = 0; attempt < 3 && done < n; ++attempt) {
        const int q = pick_shared_queue(r.policy, worker, r.worker_count, tick, attempt,
                                        [&](int i) { return r.shared_ring<S>(i); });
        done += r.shared_ring<S>(q).try_push(in + done, n - done);
      }
      ++tick;
    } else {
      if (done < n) done += r.shared_ring<S>(worker).try_push(in + done, n - done);
    }
  }
  if (done < n) {
    if constexpr (T.lockfree_global) done += r.global_ring<S>().try_push(in + done, n - done);
    else done += locked_push<S>(r, in + done, n - done);
  }
  return done;
}

/// push_some for all n; when the global queue is full too, reports QueueOverflow naming the first
/// task that found no room and returns false.
template <cuda::thread_scope S, mode M>
CANOPY_HD bool push_batch(const scheduler_ref& r, int worker, local_ring* priv, std::uint32_t& tick, const task_id* in,
                          int n) {
  const int done = push_some<S, M>(r, worker, priv, tick, in, n);
  if (done < n) {
    fail<S>(r, status::queue_overflow, in[done]);
    return false;
  }
  return true;
}

/// Resolves `t`'s successors under the tree mutex (modes before lockfree-tree).
template <cuda::thread_scope S, class OnReady>
CANOPY_HD int resolve_locked(const scheduler_ref& r, task_id t, OnReady&& on_ready) {
  spin_mutex_ref<S> m{&r.counters->tree_mutex};
  scoped_lock lock(m);
  // Under the mutex the counters are plain data; the arrive() still uses atomics, which is
  // harmless and keeps one code path for counter updates.
  return resolve_successors<S>(r.graph, t, on_ready);
}

}  // namespace canopy::detail
