// SPDX-License-Identifier: Apache-2.0
// The pop order and the push order, once for every ring-based mode and both backends (portable:
// g++ and nvcc). Pop: private, own shared, sources, global. Push: private, a shared queue (own, or
// picked by the push policy), global.
#pragma once

#include <cuda/atomic>
#include <cstdint>

#include "canopy/detail/locked_queues.hpp"
#include "canopy/detail/pick_queue.hpp"
#include "canopy/detail/queue.hpp"
#include "canopy/detail/scheduler_state.hpp"
#include "canopy/mode.hpp"

namespace canopy::detail {

/// A worker's batch: `queued` tasks in the worker's batch array, then `sources` consecutive
/// entries of graph.sources from `source_first`. Sources are handed over as a range so that a GPU
/// block master does not copy thousands of ids one by one while its block waits; each lane group
/// reads its own.
struct batch_view {
  int queued;
  int sources;
  std::uint32_t source_first;
  CANOPY_HD int size() const { return queued + sources; }
  CANOPY_HD task_id at(const scheduler_ref& r, const task_id* queued_ids, int i) const {
    return i < queued ? queued_ids[i] : r.graph.sources[source_first + static_cast<std::uint32_t>(i - queued)];
  }
};

/// Fetches up to `max` tasks in pop order: private, own shared, sources, global; the queued ones
/// into `out`.
///
/// `first`: the worker's first fetch of a run. Every queue is still empty then, so it goes to the
/// sources directly; a worker's first range of sources is dealt statically when the host set
/// static_sources (no atomic: one round trip less, and no queue of workers on the cursor's line,
/// before the first task); and a first fetch that got sources does not look at the global queue.
///
/// `sources_done` is the worker's own note that the sources are exhausted: the cursor only grows,
/// so once a claim comes back short no later claim can succeed, and the worker stops reading the
/// cursor's line (every idle block of a full grid polling it slows the blocks that work).
template <cuda::thread_scope S, mode M>
CANOPY_HD batch_view fetch_batch(const scheduler_ref& r, int worker, local_ring* priv, task_id* out, int max, bool first,
                                 bool& sources_done) {
  constexpr mode_traits T = traits_of(M);
  batch_view b{0, 0, 0};
  if (!first) {
    if constexpr (T.private_queues) b.queued += priv->try_pop(out, max);
    if constexpr (T.shared_queues)
      if (b.queued < max) b.queued += r.shared_ring<S>(worker).try_pop(out + b.queued, max - b.queued);
  }
  if (b.queued < max && !sources_done) {
    const int want = max - b.queued < r.source_chunk ? max - b.queued : r.source_chunk;
    if (first && r.static_sources > 0) {
      // The host made source_chunk <= max, so want == source_chunk here and the static ranges
      // tile [0, static_sources).
      // A short chunk ends the dealt range; the sources after it (dealt_sources) are claimed later.
      b.source_first = static_cast<std::uint32_t>(worker) * static_cast<std::uint32_t>(r.source_chunk);
      b.sources = dealt_from(r, b.source_first, want);
      sources_done = b.sources < want && r.static_sources >= static_cast<std::uint32_t>(r.graph.source_count);
    } else {
      b.sources = claim_source_range<S>(r, want, !first, &b.source_first);
      sources_done = b.sources < want;
    }
  }
  if (b.size() < max && !(first && b.size() > 0)) {
    const int room = max - b.size();
    if constexpr (T.lockfree_global) b.queued += r.global_ring<S>().try_pop(out + b.queued, room);
    else b.queued += locked_pop<S>(r, out + b.queued, room);
  }
  return b;
}

/// Pushes up to n ready tasks in push order: private, a shared queue (own, or picked by the
/// policy), global. Returns how many found room (in order: in[0 .. returned) are queued).
///
/// `per_queue` caps what the private queue and each shared queue take of this push (0: no cap);
/// the rest goes to the global queue. Only one worker pops a private or a shared queue, so a DAG
/// task that makes hundreds of tasks ready at once (the FMM's up task, whose M2L targets wait for
/// it) would leave them all to one worker while the others idle; the GPU's block loop passes its
/// batch size for DAGs, so a worker keeps about one batch and every idle worker can take the rest.
/// A tree's task makes at most one task ready, so a tree's push never reaches the cap.
template <cuda::thread_scope S, mode M>
CANOPY_HD int push_some(const scheduler_ref& r, int worker, local_ring* priv, std::uint32_t& tick, const task_id* in,
                        int n, int per_queue = 0) {
  constexpr mode_traits T = traits_of(M);
  const auto room = [&](int done) { return per_queue > 0 && n - done > per_queue ? per_queue : n - done; };
  int done = 0;
  if constexpr (T.private_queues) done += priv->try_push(in, room(0));
  if constexpr (T.shared_queues) {
    if constexpr (T.balanced_push) {
      for (int attempt = 0; attempt < 3 && done < n; ++attempt) {
        const int q = pick_shared_queue(r.policy, worker, r.worker_count, tick, attempt,
                                        [&](int i) { return r.shared_ring<S>(i); });
        done += r.shared_ring<S>(q).try_push(in + done, room(done));
      }
      ++tick;
    } else {
      if (done < n) done += r.shared_ring<S>(worker).try_push(in + done, room(done));
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
                          int n, int per_queue = 0) {
  const int done = push_some<S, M>(r, worker, priv, tick, in, n, per_queue);
  if (done < n) {
    fail<S>(r, status::queue_overflow, in[done]);
    return false;
  }
  return true;
}

}  // namespace canopy::detail
