// SPDX-License-Identifier: Apache-2.0
// Lane groups: G consecutive lanes of one warp that run one task together.
//
// An Ops type may ask the GPU scheduler to run each task on a group of lanes instead of one thread
// by declaring
//
//   static constexpr int group_size = 8;                      // 1, 2, 4, 8, 16 or 32
//   template <int G>
//   __device__ void operator()(canopy::task_id t, const canopy::lane_group<G>& g) const;
//
// Every lane of the group calls the operator with the same task, in convergence; the lanes split
// the work (g.rank in 0..G-1) and combine it with shuffles. Whatever any lane wrote before
// returning is visible to the tasks that depend on `t`, to every lane of their groups (the
// scheduler synchronises the group around the dependency counter). Reads of data that other tasks
// wrote during the same run should bypass L1 (`__ldcg`): the scheduler's acquire orders them, but
// the lanes that did not perform the acquire themselves may otherwise find a line this SM cached
// earlier (ArborX #574, Axom #307).
//
// An Ops may also declare `static constexpr int tasks_per_group = N;` (1..32, capped at G): how
// many tasks of a batch each group runs at most, one after the other (default 4). Heavy tasks that
// move many bytes each want more (the octree's twig tasks ask for 16); a run with few sources per
// block runs fewer, down to min(4, N), so that every block gets several batches (run_batch_max).
//
// An Ops may also declare `__device__ void prefetch(canopy::task_id, canopy::prefetch_stage) const`
// (canopy/prefetch.cuh): hints, called by one lane, for tasks of a full batch that its group runs
// later (`structure`: the task's small records, into L1, for every task of the group's share when
// it starts; `data`: the bulk bytes of the group's next task, into L2, while it runs the current
// one). A prefetch must not write anything a task reads; results never depend on it. It is called
// by some lanes of a warp only, so it must not use group collectives (shuffles, g.sync()). It pays
// only when groups run several tasks per batch; a `prefetch` with another signature, or not
// const, is not seen (the scheduler tests for exactly this one) and is silently never called.
//
// An Ops that only ever runs on trees (task_graph::from_parents, device_task_graph) may declare
// `static constexpr bool tree_only = true;`: its kernel is then compiled without the DAG paths,
// which leaves the task more registers (the octree passes do; canopy/detail/dependency.hpp). Both
// backends refuse to run it over a DAG (invalid_argument).
//
// The CPU backend and the `mutex` .. `private-queues` modes (only warp masters work) call the group
// operator with G = 1, so one operator serves every mode; a scalar `operator()(task_id)` is still
// needed for the CPU backend.
#pragma once

#if !defined(__CUDACC__)
#error "canopy/lane_group.cuh is device code: include it from .cu files only"
#endif

#include "canopy/min_max.hpp"

namespace canopy {

template <int G>
struct lane_group {
  static_assert(G == 1 || G == 2 || G == 4 || G == 8 || G == 16 || G == 32, "G must be a power of two <= 32");
  static constexpr int size = G;
  unsigned mask;  // the group's lanes in the warp
  int rank;       // 0 .. G-1

  /// The calling lane's group (blocks are one-dimensional with a multiple of 32 threads).
  __device__ static lane_group here() {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    lane_group g;
    g.rank = lane & (G - 1);
    g.mask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (lane & ~(G - 1));
    return g;
  }
  /// Converges the group; orders memory among its lanes (__syncwarp does, a shuffle does not).
  __device__ void sync() const {
    if constexpr (G > 1) __syncwarp(mask);
  }
  /// The value of lane rank ^ lane_mask.
  template <class T>
  __device__ T exchange(T value, int lane_mask) const {
    if constexpr (G > 1) return __shfl_xor_sync(mask, value, lane_mask);
    else return value;
  }
  /// Lane 0's value, in every lane.
  template <class T>
  __device__ T from_first(T value) const {
    return from_lane(value, 0);
  }
  /// Lane `from`'s value (a rank of the group), in every lane.
  template <class T>
  __device__ T from_lane(T value, int from) const {
    if constexpr (G > 1) return __shfl_sync(mask, value, from, G);
    else return value;
  }
  /// True in every lane if it is true in any.
  __device__ bool any(bool p) const {
    if constexpr (G > 1) return __any_sync(mask, p);
    else return p;
  }
  /// The lowest rank whose p is true, in every lane; -1 if none.
  __device__ int first_with(bool p) const {
    if constexpr (G > 1) {
      const unsigned b = __ballot_sync(mask, p) & mask;
      return b == 0 ? -1 : __ffs(b) - __ffs(mask);
    } else {
      return p ? 0 : -1;
    }
  }
};

/// Butterfly sum / min / max over the group: every lane ends with the same value. With Stride > 1
/// the group is Stride-lane sub-groups whose lanes hold the same value, and the result is over the
/// sub-groups (one value each): the butterflies stop at offset Stride.
template <int Stride = 1, int G, class T, class Combine>
__device__ __forceinline__ T group_reduce(const lane_group<G>& g, T v, Combine combine) {
#pragma unroll
  for (int o = G / 2; o >= Stride; o /= 2) v = combine(v, g.exchange(v, o));
  return v;
}
template <int Stride = 1, int G, class T>
__device__ __forceinline__ T group_sum(const lane_group<G>& g, T v) {
  return group_reduce<Stride>(g, v, [](T mine, T other) { return mine + other; });
}
/// The sum of `v` over the group's ranks up to and including the calling lane's (Hillis-Steele over
/// shuffles).
template <int G, class T>
__device__ __forceinline__ T group_inclusive_sum(const lane_group<G>& g, T v) {
  if constexpr (G > 1) {
#pragma unroll
    for (int offset = 1; offset < G; offset *= 2) {
      const T lower = __shfl_up_sync(g.mask, v, offset, G);
      if (g.rank >= offset) v += lower;
    }
  }
  return v;
}
template <int Stride = 1, int G, class T>
__device__ __forceinline__ T group_min(const lane_group<G>& g, T v) {
  return group_reduce<Stride>(g, v, [](T mine, T other) { return canopy::smaller(mine, other); });
}
template <int Stride = 1, int G, class T>
__device__ __forceinline__ T group_max(const lane_group<G>& g, T v) {
  return group_reduce<Stride>(g, v, [](T mine, T other) { return canopy::larger(mine, other); });
}

}  // namespace canopy
