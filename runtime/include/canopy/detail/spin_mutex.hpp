// SPDX-License-Identifier: Apache-2.0
// A spin mutex over memory the caller owns (device memory, shared memory or host). Used only by the
// modes that reproduce the seed's locked designs. On the GPU, one lane per warp takes it (the
// seed's warp master), so lanes of one warp never spin against each other.
//
// Test-and-test-and-set with backoff: waiters spin on a plain load and try the exchange only when
// the word looks free, so a crowd of waiters does not keep the line busy with read-modify-writes.
// (A ticket lock is fair, but forces every waiter through the critical section in turn: with
// thousands of warp masters queued for a one-task queue that cost milliseconds per task.) The
// queues that use it also look before they lock, so idle workers never take it.
#pragma once

#include <cuda/atomic>
#include <cstdint>

#include "canopy/config.hpp"
#include "canopy/detail/backoff.hpp"

namespace canopy::detail {

template <cuda::thread_scope Scope>
struct spin_mutex_ref {
  int* word;

  CANOPY_HD void lock() const {
    cuda::atomic_ref<int, Scope> w(*word);
    backoff b;
    for (;;) {
      // acquire: everything the previous holder wrote before unlock() is visible to us.
      if constexpr (Scope == cuda::thread_scope_block) {
        // A block's mutex lives in shared memory and has at most 32 waiters (its warp masters): the
        // exchange alone. The look before it saves no traffic there; with the exchange and the
        // unlock's atomic store as the only accesses, compute-sanitizer's racecheck reports nothing
        // on the word (checked on an H100; see warp_master_loop.cuh for the words the lock protects).
        if (w.exchange(1, cuda::std::memory_order_acquire) == 0) return;
      } else {
        if (w.load(cuda::std::memory_order_relaxed) == 0 && w.exchange(1, cuda::std::memory_order_acquire) == 0) return;
      }
      b.pause();
    }
  }
  CANOPY_HD void unlock() const {
    cuda::atomic_ref<int, Scope>(*word).store(0, cuda::std::memory_order_release);  // publish the section
  }
};

template <class Mutex>
struct scoped_lock {
  const Mutex& m;
  CANOPY_HD explicit scoped_lock(const Mutex& mu) : m(mu) { m.lock(); }
  CANOPY_HD ~scoped_lock() { m.unlock(); }
  scoped_lock(const scoped_lock&) = delete;
  scoped_lock& operator=(const scoped_lock&) = delete;
};

}  // namespace canopy::detail
