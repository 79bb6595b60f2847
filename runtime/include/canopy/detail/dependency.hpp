// SPDX-License-Identifier: Apache-2.0
// Lock-free tree nodes: resolving a finished task's successors through atomic counters.
#pragma once

#include <cuda/atomic>

#include "canopy/config.hpp"
#include "canopy/task_graph.hpp"

namespace canopy::detail {

/// One arrival on `t`'s counter. Returns true for the last arriver, which then owns `t`.
///
/// acq_rel: the release half publishes the arriving task's results (its payload) to whoever
/// brings the counter to zero; the acquire half makes the last arriver see every earlier
/// arriver's results. On the GPU the acquire is a device-scope fence that also invalidates the
/// L1 lines the owner might otherwise read stale (ArborX #574, Axom #307 read children's data
/// through L1 after a relaxed atomic and got intermittently wrong results).
/// The last arriver resets the counter for the next run; no other agent touches it again in
/// this run, so a relaxed store is enough (the kernel boundary orders it before the next run).
/// The reset value never changes during a run, so it is loaded before the atomic: its round trip
/// overlaps the arrival's (on a GPU, the release fence's wait and the atomic) instead of coming
/// after it, before the store: a climbing chain waits for it on every level.
template <cuda::thread_scope Scope>
CANOPY_HD CANOPY_FORCEINLINE bool arrive(const task_graph_ref& g, task_id t) {
  cuda::atomic_ref<std::int32_t, Scope> c(g.pending[t]);
  const std::int32_t reset = g.dependency_count[t];
  if (c.fetch_sub(1, cuda::std::memory_order_acq_rel) != 1) return false;
  c.store(reset, cuda::std::memory_order_relaxed);
  return true;
}

/// resolve_successors for a tree whose caller already loaded `t`'s parent `p` (no_task for a
/// root): a caller that loads it before running `t` has it by the time `t` is done.
template <cuda::thread_scope Scope, class OnReady>
CANOPY_HD CANOPY_FORCEINLINE int resolve_parent(const task_graph_ref& g, task_id p, OnReady&& on_ready) {
  if (p == no_task) return 0;
  if (arrive<Scope>(g, p)) on_ready(p);
  return 1;
}

/// Calls on_ready(s) for every successor s of `t` that `t` made ready, and returns the number of
/// successors (0 for a sink).
template <cuda::thread_scope Scope, class OnReady>
CANOPY_HD CANOPY_FORCEINLINE int resolve_successors(const task_graph_ref& g, task_id t, OnReady&& on_ready) {
  if (g.succ_offsets == nullptr) return resolve_parent<Scope>(g, g.parent[t], on_ready);
  const std::int32_t b = g.succ_offsets[t], e = g.succ_offsets[t + 1];
  for (std::int32_t i = b; i < e; ++i)
    if (arrive<Scope>(g, g.succ[i])) on_ready(g.succ[i]);
  return e - b;
}

}  // namespace canopy::detail
