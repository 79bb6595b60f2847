// A fair spin mutex (ticket lock) over memory the caller owns (device memory, shared memory or
// host). Used only by the modes that reproduce the seed's locked designs.
//
// Why a ticket lock: with a thousand blocks spinning on one test-and-set word, the GPU's memory
// system lets some SMs win again and again; we saw a block starved for the whole 20 s deadline on
// an H100. Tickets serve waiters in arrival order, so a locked mode is slow, as in the seed, but
// never stuck. On the GPU, one lane per warp takes it (the seed's warp master).
#pragma once

#include <cuda/atomic>
#include <cstdint>

#include "canopy/config.hpp"
#include "canopy/detail/backoff.hpp"

namespace canopy {

struct ticket_lock {
  std::uint32_t next;     // next ticket to hand out
  std::uint32_t serving;  // ticket allowed in
};

template <cuda::thread_scope Scope>
struct spin_mutex_ref {
  ticket_lock* word;

  CANOPY_HD void lock() const {
    const std::uint32_t mine =
        cuda::atomic_ref<std::uint32_t, Scope>(word->next).fetch_add(1, cuda::std::memory_order_relaxed);
    cuda::atomic_ref<std::uint32_t, Scope> serving(word->serving);
    detail::backoff b;
    // acquire: everything the previous holder wrote before unlock() is visible to us.
    while (serving.load(cuda::std::memory_order_acquire) != mine) b.pause();
  }
  CANOPY_HD void unlock() const {
    cuda::atomic_ref<std::uint32_t, Scope> serving(word->serving);
    // Only the holder writes `serving`, so load + store is enough; release publishes the section.
    serving.store(serving.load(cuda::std::memory_order_relaxed) + 1, cuda::std::memory_order_release);
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

}  // namespace canopy
