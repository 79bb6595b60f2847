// SPDX-License-Identifier: Apache-2.0
// The global queues of the locked modes: the fixed ring guarded by one mutex (modes fixed-queue ..
// shared-queues) and the `mutex` mode's linked list, a node allocated per push as in the seed.
// Portable: compiles with g++ and nvcc.
#pragma once

#include <cuda/atomic>
#include <cstdint>

#include "canopy/detail/dependency.hpp"
#include "canopy/detail/scheduler_state.hpp"
#include "canopy/detail/spin_mutex.hpp"

#if !CANOPY_DEVICE_CODE
#include <new>
#endif

namespace canopy::detail {

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
