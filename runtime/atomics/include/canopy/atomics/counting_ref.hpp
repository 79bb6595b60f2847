// SPDX-License-Identifier: Apache-2.0
// counting_ref: wraps an atomic ref and tallies every read-modify-write that goes through it.
// Instrumentation for validation runs (the atomics lab's "atomics issued" count, tests that check
// "one atomic per warp"); it adds one relaxed atomic per counted operation, so never time it.
//
//   counting_ref counted{cuda::atomic_ref<unsigned, cuda::thread_scope_device>(*d_count), d_tally};
//   warp_aggregated_increment(counted, cuda::std::memory_order_relaxed);   // *d_tally += 1 per warp
#pragma once

#include <cuda/atomic>
#include <cuda/std/type_traits>

#include "canopy/config.hpp"

namespace canopy::atomics {

template <class Ref>
struct counting_ref {
  using value_type = typename Ref::value_type;

  Ref ref;
  unsigned long long* tally;  // device-visible counter of operations issued through this ref

  CANOPY_HD value_type fetch_add(value_type value, cuda::std::memory_order order) const {
    count();
    return ref.fetch_add(value, order);
  }
  CANOPY_HD value_type fetch_max(value_type value, cuda::std::memory_order order) const {
    count();
    return ref.fetch_max(value, order);
  }
  CANOPY_HD value_type fetch_min(value_type value, cuda::std::memory_order order) const {
    count();
    return ref.fetch_min(value, order);
  }

 private:
  CANOPY_HD void count() const {
    // A pure event counter: relaxed, read by the host after the kernel has finished.
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(*tally).fetch_add(1ull,
                                                                                     cuda::std::memory_order_relaxed);
  }
};

template <class Ref>
counting_ref(Ref, unsigned long long*) -> counting_ref<Ref>;

// Passed by value into kernels, like the refs it wraps.
static_assert(cuda::std::is_trivially_copyable_v<counting_ref<cuda::atomic_ref<unsigned, cuda::thread_scope_device>>>);

}  // namespace canopy::atomics
