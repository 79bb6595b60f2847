// SPDX-License-Identifier: Apache-2.0
// Fixed-capacity task queues. Never allocate while running; a full queue is a value the caller
// sees (try_push returns how many it took), never a silent drop.
//
//  * ring_ref: lock-free multi-producer multi-consumer ring over memory owned elsewhere (device
//    memory for the GPU, host memory for the CPU backend). Batch operations take k items (one
//    fetch_sub) or reserve k free slots (one CAS) and claim k consecutive tickets with one
//    fetch_add, so a block master moves a whole batch with three atomics. Each slot is one 64-bit word {sequence, task} so the
//    task travels with its publication flag: the producer's release store and the consumer's
//    acquire load are what hand over everything the producer knew (the payloads of the task's
//    children, published earlier through the dependency counters).
//  * local_ring: a plain ring used by one thread at a time (a block's private queue in shared
//    memory, touched only by its block master; or under a mutex in the locked modes).
#pragma once

#include <cuda/atomic>
#include <cstdint>

#include "canopy/config.hpp"
#include "canopy/detail/backoff.hpp"

namespace canopy::detail {

/// Shared state of a ring_ref. Initialise with ring_header::empty(capacity) and slots to 0.
/// Consumers poll `items`; it has a line of its own so that polling does not slow producers.
struct alignas(128) ring_header {
  alignas(128) std::int32_t items;  // published items not yet reserved by a consumer (see take_items)
  std::int32_t capacity;
  alignas(128) std::uint64_t head;  // next ticket to pop
  std::uint64_t tail;               // next ticket to push
  std::int32_t space;               // free slots not yet reserved by a producer

  static constexpr ring_header empty(std::int32_t capacity) {
    ring_header h{};
    h.items = 0;
    h.capacity = capacity;
    h.head = h.tail = 0;
    h.space = capacity;
    return h;
  }
};

template <cuda::thread_scope Scope>
struct ring_ref {
  ring_header* header;
  std::uint64_t* slots;  // `capacity` words, all zero initially

  // Slot word = (sequence << 32) | task. For ticket t in turn r = t / capacity the slot is free
  // for the producer when sequence == 2r and full for the consumer when sequence == 2r + 1. The
  // sequence is compared for equality, so its 32-bit wrap is harmless. (The classic single
  // sequence per slot breaks for capacity 1, where "full at t" equals "free at t + 1".)
  static CANOPY_HD std::uint32_t free_seq(std::uint64_t turn) { return static_cast<std::uint32_t>(2 * turn); }
  static CANOPY_HD std::uint32_t full_seq(std::uint64_t turn) { return static_cast<std::uint32_t>(2 * turn + 1); }

  CANOPY_HD std::int32_t capacity() const { return header->capacity; }

  /// Items currently published and unclaimed (a racy sample, for load-balancing decisions; briefly
  /// low, even negative, while a consumer gives back what it found missing, take_items).
  CANOPY_HD std::int32_t size_hint() const {
    return cuda::atomic_ref<std::int32_t, Scope>(header->items).load(cuda::std::memory_order_relaxed);
  }

  /// Pushes up to n tasks; returns how many were pushed (the first ones of `tasks`).
  CANOPY_HD int try_push(const task_id* tasks, int n) const {
    std::uint64_t first = 0;
    const int k = reserve_push(n, &first);
    if (k == 0) return 0;
    for (int i = 0; i < k; ++i) fill(first + static_cast<std::uint64_t>(i), tasks[i]);
    publish(k);
    return k;
  }

  // try_push in three steps: reserve room and claim the tickets (reserve_push: one CAS, one
  // fetch_add), fill each claimed slot (fill, or fill_after_fence after a fence of the caller's;
  // in any order, by any thread the tickets are handed to), then, once every fill is done and
  // ordered before it, publish them (publish). run_dag_by_groups' lanes push their bursts so, with
  // one fence for a burst. A consumer that reserves an item before its slot is filled waits for
  // the fill, as it does for a producer that is still writing.

  /// Reserves up to n free slots and claims as many consecutive tickets from *first; returns how
  /// many (0 when the ring is full).
  CANOPY_HD int reserve_push(int n, std::uint64_t* first) const {
    const int k = reserve(header->space, n);
    if (k > 0)
      *first = cuda::atomic_ref<std::uint64_t, Scope>(header->tail).fetch_add(static_cast<std::uint64_t>(k), cuda::std::memory_order_relaxed);
    return k;
  }

  /// Writes task t to the slot of `ticket` (one that reserve_push claimed), with a release store.
  CANOPY_HD void fill(std::uint64_t ticket, task_id t) const {
    const std::uint64_t cap = static_cast<std::uint64_t>(header->capacity);
    cuda::atomic_ref<std::uint64_t, Scope> slot(slots[ticket % cap]);
    // The slot's previous occupant was reserved by a consumer (space said so); it may still be
    // reading it, so wait for it to hand the slot back. Bounded: that consumer is running.
    wait_for(slot, free_seq(ticket / cap));
    const std::uint64_t word = (static_cast<std::uint64_t>(full_seq(ticket / cap)) << 32) | static_cast<std::uint32_t>(t);
    slot.store(word, cuda::std::memory_order_release);  // hand over the task and what led to it
  }

  /// fill for a caller that already issued a release fence after everything the task's consumer
  /// must see: the store is relaxed (the fence and a strong store publish what a release store
  /// would), and the slot is first read relaxed, the acquire spin only if it is not free yet (its
  /// consumer is still reading: the same location, so no acquire is needed to write after it).
  CANOPY_HD void fill_after_fence(std::uint64_t ticket, task_id t) const {
    const std::uint64_t cap = static_cast<std::uint64_t>(header->capacity);
    cuda::atomic_ref<std::uint64_t, Scope> slot(slots[ticket % cap]);
    if (static_cast<std::uint32_t>(slot.load(cuda::std::memory_order_relaxed) >> 32) != free_seq(ticket / cap))
      wait_for(slot, free_seq(ticket / cap));
    const std::uint64_t word = (static_cast<std::uint64_t>(full_seq(ticket / cap)) << 32) | static_cast<std::uint32_t>(t);
    slot.store(word, cuda::std::memory_order_relaxed);
  }

  /// Publishes k filled slots to the consumers (release: whoever reserves them also sees the slots).
  CANOPY_HD void publish(int k) const {
    cuda::atomic_ref<std::int32_t, Scope>(header->items).fetch_add(k, cuda::std::memory_order_release);
  }

  CANOPY_HD bool try_push(task_id t) const { return try_push(&t, 1) == 1; }

  /// Pops up to max tasks into out; returns how many (0 when empty).
  CANOPY_HD int try_pop(task_id* out, int max) const {
    return transfer(header->head, header->space, take_items(max),
                    [&](int i, cuda::atomic_ref<std::uint64_t, Scope>& slot, std::uint64_t turn) {
                      // `items` counted k published tasks, but our tickets may belong to a producer
                      // that reserved earlier and is still writing: wait for its release store
                      // (acquire pairs with it).
                      const std::uint64_t word = wait_for(slot, full_seq(turn));
                      out[i] = static_cast<task_id>(static_cast<std::uint32_t>(word));
                      slot.store(static_cast<std::uint64_t>(free_seq(turn + 1)) << 32, cuda::std::memory_order_release);
                    });
  }

  CANOPY_HD bool try_pop(task_id& out) const { return try_pop(&out, 1) == 1; }

 private:
  // Moves k tasks out of the ring (try_pop; k items already taken, take_items): claims k
  // consecutive tickets of `cursor` (head), calls step(i, slot, turn) for the i-th, then hands the k
  // units to `other` (free slots): release, so that whoever reserves them there also sees the
  // slots' words. Returns k.
  template <class Step>
  CANOPY_HD int transfer(std::uint64_t& cursor, std::int32_t& other, int k, Step&& step) const {
    if (k == 0) return 0;
    const std::uint64_t first =
        cuda::atomic_ref<std::uint64_t, Scope>(cursor).fetch_add(static_cast<std::uint64_t>(k), cuda::std::memory_order_relaxed);
    const std::uint64_t cap = static_cast<std::uint64_t>(header->capacity);
    for (int i = 0; i < k; ++i) {
      const std::uint64_t ticket = first + static_cast<std::uint64_t>(i);
      cuda::atomic_ref<std::uint64_t, Scope> slot(slots[ticket % cap]);
      step(i, slot, ticket / cap);
    }
    cuda::atomic_ref<std::int32_t, Scope>(other).fetch_add(k, cuda::std::memory_order_release);
    return k;
  }

  // Takes up to `want` published items for a consumer; 0 when it finds none. One fetch_sub, and a
  // fetch_add to give back what was not there, instead of reserve's compare-and-swap loop: with
  // thousands of GPU warps polling one queue, every success of a CAS cost a round of failures, and
  // the global queue handed out about 5 tasks a microsecond (the FMM's urgent tasks at 1M points,
  // bench/RESULTS.md). `items` may dip below the truth, or below zero, until the give-back: another
  // consumer then finds fewer items or none (it polls again), never more than were published.
  CANOPY_HD int take_items(int want) const {
    cuda::atomic_ref<std::int32_t, Scope> c(header->items);
    const std::int32_t seen = c.load(cuda::std::memory_order_relaxed);
    if (seen <= 0) return 0;
    const std::int32_t take = seen < want ? seen : want;
    // relaxed is enough: the slot's own sequence word carries the synchronisation.
    const std::int32_t before = c.fetch_sub(take, cuda::std::memory_order_relaxed);
    const std::int32_t got = before >= take ? take : before > 0 ? before : 0;
    if (got < take) c.fetch_add(take - got, cuda::std::memory_order_relaxed);
    return got;
  }

  // Takes min(want, counter) units from a counter that never goes negative; 0 when it is empty.
  // Producers reserve free slots so: a push that finds no room may fail a run (queue_overflow), so
  // it must never see less room than there is.
  static CANOPY_HD int reserve(std::int32_t& counter, int want) {
    cuda::atomic_ref<std::int32_t, Scope> c(counter);
    std::int32_t cur = c.load(cuda::std::memory_order_relaxed);
    while (cur > 0) {
      const std::int32_t take = cur < want ? cur : want;
      // relaxed is enough: the slot's own sequence word carries the synchronisation.
      if (c.compare_exchange_weak(cur, cur - take, cuda::std::memory_order_relaxed, cuda::std::memory_order_relaxed))
        return take;
    }
    return 0;
  }

  static CANOPY_HD std::uint64_t wait_for(cuda::atomic_ref<std::uint64_t, Scope>& slot, std::uint32_t seq) {
    detail::backoff b;
    for (;;) {
      const std::uint64_t word = slot.load(cuda::std::memory_order_acquire);
      if (static_cast<std::uint32_t>(word >> 32) == seq) return word;
      b.pause();
    }
  }
};

/// A plain ring used by one thread at a time.
struct local_ring {
  task_id* slots;
  std::int32_t capacity;
  std::int32_t head;
  std::int32_t count;

  CANOPY_HD int try_push(const task_id* tasks, int n) {
    int k = capacity - count;
    if (k > n) k = n;
    for (int i = 0; i < k; ++i) slots[(head + count + i) % capacity] = tasks[i];
    count += k;
    return k;
  }
  CANOPY_HD int try_pop(task_id* out, int max) {
    const int k = count < max ? count : max;
    for (int i = 0; i < k; ++i) out[i] = slots[(head + i) % capacity];
    head = (head + k) % (capacity > 0 ? capacity : 1);
    count -= k;
    return k;
  }
};

}  // namespace canopy::detail
