// SPDX-License-Identifier: Apache-2.0
// What the scheduler reads off a user's Ops type: lanes per task, tasks per lane group and batch,
// the prefetch hook; and how it calls a task.
#pragma once

#include <concepts>
#include <cstdint>

#include "canopy/config.hpp"
#include "canopy/lane_group.cuh"
#include "canopy/prefetch.cuh"

namespace canopy::detail {

/// Ops that run each task on a lane group declare `group_size` (canopy/lane_group.cuh).
template <class Ops>
inline constexpr bool has_group_operator = requires { Ops::group_size; };

template <class Ops>
constexpr int group_size_of() {
  if constexpr (has_group_operator<Ops>) {
    constexpr int G = Ops::group_size;
    static_assert(G == 1 || G == 2 || G == 4 || G == 8 || G == 16 || G == 32,
                  "Ops::group_size must be 1, 2, 4, 8, 16 or 32");
    return G;
  } else {
    return 1;
  }
}

/// The most tasks a lane group runs one after the other in a batch: Ops::tasks_per_group if
/// declared (1 .. 32), else 4; at most G, so that a batch fits the blockDim.x entries of the batch
/// array. A run with few sources per block runs fewer (run_batch_max).
/// Bigger batches spread the master's fetch (L2 round trips while the block waits) over more work.
template <class Ops>
inline constexpr bool has_tasks_per_group = requires { Ops::tasks_per_group; };

template <class Ops, int G>
constexpr int tasks_per_group_of() {
  int t = 4;
  if constexpr (has_tasks_per_group<Ops>) {
    static_assert(Ops::tasks_per_group >= 1 && Ops::tasks_per_group <= 32, "Ops::tasks_per_group must be 1..32");
    t = Ops::tasks_per_group;
  }
  return t < G ? t : G;
}

/// The most tasks a block's master fetches at once in one run over `sources` sources on `grid`
/// blocks: groups x tasks per group, where a graph with few sources per block runs fewer tasks per
/// group (down to min(4, Ops's)), so that every block still gets about four batches of sources.
/// With fewer, a block that runs slower than others (several share an SM's bandwidth) cannot leave
/// its work to them, and the run waits for it; with more, large trees pay for more fetches.
template <class Ops>
CANOPY_HD constexpr int run_batch_max(int threads, std::int64_t sources, int grid) {
  constexpr int G = group_size_of<Ops>();
  constexpr int most = tasks_per_group_of<Ops, G>();
  constexpr int least = most < 4 ? most : 4;
  const std::int64_t groups = threads / G;
  const std::int64_t fits = sources / (static_cast<std::int64_t>(grid > 0 ? grid : 1) * groups * 4);
  const int per_group = fits >= most ? most : fits <= least ? least : static_cast<int>(fits);
  return static_cast<int>(groups) * per_group;
}

/// Ops may declare `__device__ void prefetch(task_id, canopy::prefetch_stage) const`
/// (canopy/prefetch.cuh).
template <class Ops>
inline constexpr bool has_prefetch = requires(const Ops& o, task_id t) { o.prefetch(t, prefetch_stage::data); };

/// Ops may declare `__device__ bool urgent(task_id) const`: the tasks it names run before the others
/// that are ready. In warp_rounds on a DAG (run_dag_by_groups) a group that makes an urgent task
/// ready runs it next (before any other it made ready), pushes the other urgent ones to the global
/// queue, and every group looks there before its own block's queue; so an urgent task waits for
/// the first group anywhere to finish its task, not for the tasks queued before it (first in,
/// first out). Mark the few tasks of the critical path (the FMM can mark its upward pass and the
/// coarse cells' translations, gpu_evaluator::set_urgent_height; measured, no choice of them ran
/// faster, docs/FMM.md). Other modes and trees run with
/// Ops declaring tree_only ignore it. It is asked once for every task made ready, by the lane that
/// made it ready, before that lane's acquire: it may read only what was fixed before the run (a
/// load of a read-only array, a comparison) and must not use warp collectives. Any Ops that
/// declares it makes groups look at the global queue first, whether or not it ever says yes. The
/// urgent tasks share that one queue: marking most tasks urgent serialises the run on it (the FMM
/// at 1M points with every m2l and down task urgent: 27 ms against 10.1, docs/FMM.md).
template <class Ops>
inline constexpr bool has_urgent = requires(const Ops& o, task_id t) {
  { o.urgent(t) } -> std::convertible_to<bool>;
};

/// How many tasks of its share ahead of the one it runs a group asks for the data of (0: no
/// prefetch at all). Further ahead, the lines can leave L2 before their turn.
/// It changes inline kernel templates: set it for the whole project, never per file.
#ifndef CANOPY_PREFETCH_AHEAD
#define CANOPY_PREFETCH_AHEAD 1
#endif

template <class Ops, int G>
__device__ __forceinline__ void invoke_task(const Ops& ops, task_id t, const lane_group<G>& g) {
  if constexpr (has_group_operator<Ops>) ops(t, g);
  else ops(t);
}

}  // namespace canopy::detail
