// SPDX-License-Identifier: Apache-2.0
// Lock-free tree nodes: resolving a finished task's successors through atomic counters.
#pragma once

#include <cuda/atomic>

#include "canopy/config.hpp"
#include "canopy/task_graph.hpp"

namespace canopy::detail {

/// Ops that only ever run on trees (one successor per task: task_graph::from_parents, a
/// device_task_graph) may declare `static constexpr bool tree_only = true;`. Their GPU kernel is
/// compiled without the DAG paths (successor lists, the lanes' shared arrivals), which leaves the
/// task more registers under the kernel's cap (see bench/RESULTS.md for what the octree passes gain).
/// Both backends refuse to run such Ops over a DAG (invalid_argument).
/// (Read in a constant expression, not only tested in a requires-clause, so that nvcc counts the
/// member as used: an Ops in an anonymous namespace would otherwise get warning 177.)
template <class Ops>
constexpr bool tree_only_value() {
  if constexpr (requires { Ops::tree_only; }) return static_cast<bool>(Ops::tree_only);
  else return false;
}
template <class Ops>
inline constexpr bool tree_only_of = tree_only_value<Ops>();

/// What both backends say when tree_only Ops are asked to run over a DAG (after "gpu backend: " or
/// "cpu backend: ").
inline constexpr const char* tree_only_on_a_dag =
    "the Ops declare tree_only, but the graph has successor lists (a DAG; build trees with task_graph::from_parents)";

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

/// The arrivals of one task at successors g.succ[i], i = first, first + stride, ... < last; calls
/// on_ready(s) for each successor s it made ready.
///
/// One arrival is arrive()'s acq_rel fetch_sub. On the device two or more are issued together: one
/// release fence, then rounds of up to four relaxed fetch_subs before any result is looked at, each
/// round followed by an acquire fence if any of its fetch_subs was the last. acq_rel arrivals one
/// after the other wait for each atomic's round trip in turn (the acquire orders every later
/// access after it): a deep DAG's task with two or three successors paid that on the chain's
/// critical path. The two fences cost more than one acq_rel atomic, so a single arrival keeps
/// acq_rel; from two arrivals on, the fences cost less than the round trips they save (bench/probes/
/// hop_probe.cu measures both; the figures are in bench/RESULTS.md). The fence followed by
/// relaxed read-modify-writes publishes what a release fetch_sub would, and the acquire fence after
/// a relaxed one that read 1 synchronises with every earlier arriver's release, as arrive() does.
/// The host keeps one acq_rel fetch_sub each: ThreadSanitizer does not model standalone fences.
template <cuda::thread_scope Scope, class OnReady>
CANOPY_HD CANOPY_FORCEINLINE void arrive_each(const task_graph_ref& g, std::int32_t first, std::int32_t last,
                                             std::int32_t stride, OnReady&& on_ready) {
#if CANOPY_DEVICE_CODE
  if (first >= last) return;
  if (last - first <= stride) {
    if (arrive<Scope>(g, g.succ[first])) on_ready(g.succ[first]);
    return;
  }
  constexpr int width = 4;
  // One release fence orders the task's writes before every arrival below.
  cuda::atomic_thread_fence(cuda::std::memory_order_release, Scope);
  for (std::int32_t i = first; i < last; i += width * stride) {
    task_id s[width];
    std::int32_t reset[width], left[width];
#pragma unroll
    for (int k = 0; k < width; ++k) {
      const std::int32_t j = i + k * stride;
      s[k] = j < last ? g.succ[j] : no_task;
      reset[k] = s[k] != no_task ? g.dependency_count[s[k]] : 0;
    }
#pragma unroll
    for (int k = 0; k < width; ++k)
      left[k] = s[k] != no_task ? cuda::atomic_ref<std::int32_t, Scope>(g.pending[s[k]]).fetch_sub(1, cuda::std::memory_order_relaxed) : 0;
    // An acquire fence after the fetch_subs of this round, if any of them was the last: it must
    // follow the read of 1 it pairs with, so every round that makes a successor ready has its own.
    bool acquired = false;
#pragma unroll
    for (int k = 0; k < width; ++k) {
      if (left[k] != 1) continue;
      if (!acquired) {
        cuda::atomic_thread_fence(cuda::std::memory_order_acquire, Scope);
        acquired = true;
      }
      cuda::atomic_ref<std::int32_t, Scope>(g.pending[s[k]]).store(reset[k], cuda::std::memory_order_relaxed);
      on_ready(s[k]);
    }
  }
#else
  for (std::int32_t i = first; i < last; i += stride)
    if (arrive<Scope>(g, g.succ[i])) on_ready(g.succ[i]);
#endif
}

/// Calls on_ready(s) for every successor s of `t` that `t` made ready, and returns the number of
/// successors (0 for a sink). `TreeOnly` (tree_only_of<Ops>): the graph is known to be a tree, so
/// the successor lists are never read (the compiler drops that path).
template <cuda::thread_scope Scope, bool TreeOnly = false, class OnReady>
CANOPY_HD CANOPY_FORCEINLINE int resolve_successors(const task_graph_ref& g, task_id t, OnReady&& on_ready) {
  if (TreeOnly || g.succ_offsets == nullptr) return resolve_parent<Scope>(g, g.parent[t], on_ready);
  const std::int32_t b = g.succ_offsets[t], e = g.succ_offsets[t + 1];
  arrive_each<Scope>(g, b, e, 1, on_ready);
  return e - b;
}

}  // namespace canopy::detail
