// SPDX-License-Identifier: Apache-2.0
// Internal: a minimal fork-join over host_threads() std::threads. Work is cut by the caller into
// a fixed number of parts, so the partition (and therefore every result) is independent of how
// many threads run them; threads only pick up parts dynamically.
#pragma once

#include <canopy/trees/threads.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace canopy::trees::detail {

// Calls fn(part) for every part in [0, parts), on up to host_threads() threads (the calling thread
// is one of them). The first exception thrown by any part is rethrown after all threads joined;
// remaining parts are skipped once one has failed.
template <class Fn>
void parallel_parts(std::size_t parts, Fn&& fn) {
  const std::size_t threads = std::min<std::size_t>(host_threads(), parts);
  if (threads <= 1) {
    for (std::size_t p = 0; p < parts; ++p) fn(p);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    try {
      // relaxed: the counter only hands out indices; the join below orders all results.
      for (std::size_t p; !failed.load(std::memory_order_relaxed) &&
                          (p = next.fetch_add(1, std::memory_order_relaxed)) < parts;) {
        fn(p);
      }
    } catch (...) {
      const std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
      failed.store(true, std::memory_order_relaxed);
    }
  };
  {
    std::vector<std::jthread> pool;
    pool.reserve(threads - 1);
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
  }  // jthreads join here
  if (error) std::rethrow_exception(error);
}

// Splits [0, n) into `parts` nearly equal ranges; part p is [range_begin(n, parts, p), range_begin(n, parts, p + 1)).
inline std::size_t range_begin(std::size_t n, std::size_t parts, std::size_t p) {
  return n / parts * p + std::min(p, n % parts);
}

// Runs fn(begin, end) over [0, n) in chunks of `chunk` elements (the last one shorter).
template <class Fn>
void parallel_chunks(std::size_t n, std::size_t chunk, Fn&& fn) {
  const std::size_t parts = (n + chunk - 1) / chunk;
  parallel_parts(parts, [&](std::size_t p) { fn(p * chunk, std::min(n, (p + 1) * chunk)); });
}

}  // namespace canopy::trees::detail
