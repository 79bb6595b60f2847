// A spin mutex over one int in memory the caller owns (device memory, shared memory or host).
// Used only by the modes that reproduce the seed's locked designs. On the GPU, one lane per warp
// takes it: if several lanes of one warp spun on it, the holder could be starved on pre-Volta
// scheduling, and the seed's design avoids that by electing a warp master.
#pragma once

#include <cuda/atomic>

#include "canopy/config.hpp"
#include "canopy/detail/backoff.hpp"

namespace canopy {

template <cuda::thread_scope Scope>
struct spin_mutex_ref {
  int* word;

  CANOPY_HD void lock() const {
    cuda::atomic_ref<int, Scope> w(*word);
    detail::backoff b;
    // acquire: everything the previous holder wrote before unlock() is visible to us.
    while (w.exchange(1, cuda::std::memory_order_acquire) != 0) {
      while (w.load(cuda::std::memory_order_relaxed) != 0) b.pause();
    }
  }
  CANOPY_HD void unlock() const {
    cuda::atomic_ref<int, Scope> w(*word);
    w.store(0, cuda::std::memory_order_release);  // publish the critical section
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
