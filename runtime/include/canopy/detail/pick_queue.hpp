// SPDX-License-Identifier: Apache-2.0
// The load-balancing push function: which block's shared queue receives a task that a block made
// ready. A policy is a pure function of (policy, this worker, a per-worker counter, attempt), plus
// racy occupancy samples for least_loaded; a failed push (queue full) retries with attempt + 1.
#pragma once

#include <cstdint>

#include "canopy/config.hpp"
#include "canopy/detail/queue.hpp"
#include "canopy/push_policy.hpp"

namespace canopy::detail {

/// Cheap integer hash for sampling queues (splitmix-style finaliser).
CANOPY_HD inline std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

/// Picks the shared queue for the next push. `worker_count` >= 1. `tick` is the calling worker's
/// own counter, advanced by the caller on every pick (round-robin position, sampling seed).
template <class SharedQueueAt>
CANOPY_HD int pick_shared_queue(push_policy policy, int worker, int worker_count, std::uint32_t tick, int attempt,
                                SharedQueueAt&& queue_at) {
  const auto w = static_cast<std::uint32_t>(worker_count);
  switch (policy) {
    case push_policy::round_robin:
      // Start just after ourselves so a pushing block spreads work to others first.
      return static_cast<int>((static_cast<std::uint32_t>(worker) + 1 + tick + static_cast<std::uint32_t>(attempt)) % w);
    case push_policy::least_loaded: {
      // Power of two choices, plus our own queue: sampling everybody would cost W loads per push.
      const auto seed = mix32(static_cast<std::uint32_t>(worker) * 0x9e3779b9U + tick * 0x85ebca6bU + static_cast<std::uint32_t>(attempt));
      const int a = static_cast<int>(seed % w), b = static_cast<int>(mix32(seed) % w);
      int best = attempt == 0 ? worker : a;
      for (int q : {a, b})
        if (queue_at(q).size_hint() < queue_at(best).size_hint()) best = q;
      return best;
    }
    case push_policy::locality:
      // The block that finished the last child keeps the parent: the children's payloads are in
      // its SM's L1/L2 slice, and a subtree stays on one block. Neighbours only when full.
      return static_cast<int>((static_cast<std::uint32_t>(worker) + static_cast<std::uint32_t>(attempt)) % w);
  }
  return worker;
}

}  // namespace canopy::detail
