// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/threads.hpp>

#include <atomic>
#include <thread>

namespace canopy::trees {

namespace {
// relaxed: a configuration value; no other data is published through it.
std::atomic<unsigned> requested_threads{0};
}  // namespace

void set_host_threads(unsigned count) noexcept { requested_threads.store(count, std::memory_order_relaxed); }

unsigned host_threads() noexcept {
  const unsigned requested = requested_threads.load(std::memory_order_relaxed);
  if (requested > 0) return requested;
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware > 0 ? hardware : 1;
}

}  // namespace canopy::trees
