// SPDX-License-Identifier: Apache-2.0
// Kernels of the upward-pass baselines (nvcc only; included by baselines.cu).
//
// Work unit: a lane group of G consecutive lanes of one warp (canopy/lane_group.cuh) computes one
// node with the group P2M / M2M of canopy/passes/group_multipole.cuh, which the scheduler's octree
// client uses too, so the baselines and the scheduler differ only in how they schedule.
#pragma once

#if !defined(__CUDACC__)
#error "baselines/detail/upward_kernels.cuh needs nvcc"
#endif

#include <canopy/lane_group.cuh>
#include <canopy/passes/device_octree.cuh>
#include <canopy/passes/group_multipole.cuh>
#include <canopy/trees/multipole.hpp>
#include <canopy/trees/point.hpp>

#include <cuda/atomic>

#include <cstdint>

namespace canopy::bench::detail {

using trees::multipole;
using trees::octree_ref;
using trees::point;

inline constexpr int block_size = 256;

template <int G>
using lane_group = canopy::lane_group<G>;
using trees::group_p2m;
using trees::group_merge;
using trees::children_per_lane;
using trees::load_plain;
using trees::load_through_l2;

// (a) First launch: every leaf of the tree, whatever its level, by P2M. Leaves need nothing, so
// one wide launch reads all the points at once instead of a few leaves per level in latency-bound
// launches (an adaptive tree has leaves on ten levels or more). One group per node in node order,
// internal nodes leaving at once: the node arrays are read and the payloads written contiguously
// (going through `leaves`, in Morton order, scattered both: 350 against 325 µs on Plummer 16M).
template <int G>
__global__ void __launch_bounds__(block_size) leaf_kernel(octree_ref tree, multipole<float>* out) {
  const lane_group<G> g = lane_group<G>::here();
  const std::int64_t index = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  if (index >= tree.node_count) return;  // the whole group leaves together
  const auto node = static_cast<std::int32_t>(index);
  if (__ldg(tree.child_count + node) != 0) return;  // internal: a later launch merges it
  group_store(g, out + node, group_p2m(g, tree.points + __ldg(tree.point_begin + node), __ldg(tree.point_count + node)));
}

// (a) Then one launch per level, deepest first: the internal nodes of [begin, end) merge their
// children (computed by the leaf launch or the previous level's); the level's leaves are done.
template <int G, int Batch>
__global__ void __launch_bounds__(block_size) level_kernel(octree_ref tree, std::int32_t begin, std::int32_t end,
                                                           multipole<float>* out) {
  const lane_group<G> g = lane_group<G>::here();
  const std::int64_t index = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  if (index >= end - begin) return;  // the whole group leaves together
  const std::int32_t node = begin + static_cast<std::int32_t>(index);
  const std::int32_t children = __ldg(tree.child_count + node);
  if (children == 0) return;  // a leaf: the first launch wrote it
  group_store(g, out + node, group_merge<G, Batch>(g, out + __ldg(tree.first_child + node), children, load_plain{}));
}

// (a, per_level) One level doing all its nodes: leaves by P2M, internal nodes by merging their
// children (computed by the previous launch).
template <int G, int Batch>
__global__ void __launch_bounds__(block_size) mixed_level_kernel(octree_ref tree, std::int32_t begin, std::int32_t end,
                                                                 multipole<float>* out) {
  const lane_group<G> g = lane_group<G>::here();
  const std::int64_t index = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  if (index >= end - begin) return;  // the whole group leaves together
  const std::int32_t node = begin + static_cast<std::int32_t>(index);
  const std::int32_t children = __ldg(tree.child_count + node);
  multipole<float> r;
  if (children == 0)
    r = group_p2m(g, tree.points + __ldg(tree.point_begin + node), __ldg(tree.point_count + node));
  else
    r = group_merge<G, Batch>(g, out + __ldg(tree.first_child + node), children, load_plain{});
  group_store(g, out + node, r);
}

// (c) Last arriver climbs (Karras 2012, "Maximizing parallelism in the construction of BVHs,
// octrees, and k-d trees", sec. 4): one group per leaf, in Morton order so neighbouring groups
// read neighbouring points. After writing a node, the group's first lane counts the node in at its
// parent; the group that brings in the last child merges the parent and climbs. Nobody waits, so
// the kernel cannot hang. `arrivals` holds node_count zeros on entry and again on exit: the last
// arriver resets the counter it completed, so consecutive runs need no memset.
template <int G, int Batch>
__global__ void __launch_bounds__(block_size) last_arriver_kernel(octree_ref tree, std::int32_t* arrivals,
                                                                  multipole<float>* out) {
  const lane_group<G> g = lane_group<G>::here();
  const std::int64_t index = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  if (index >= tree.leaf_count) return;
  std::int32_t node = __ldg(tree.leaves + index);
  multipole<float> r = group_p2m(g, tree.points + __ldg(tree.point_begin + node), __ldg(tree.point_count + node));
  for (;;) {
    // The first lane writes the payload and performs the release below, so program order alone
    // puts the write before the release. (group_store, which spreads the words over the lanes,
    // made this kernel 13% slower at depth 8 on an H100: the climb is latency-bound.)
    if (g.rank == 0) out[node] = r;
    const std::int32_t parent = __ldg(tree.parent + node);
    if (parent < 0) return;
    const std::int32_t children = __ldg(tree.child_count + parent);
    int arrived = 0;
    if (g.rank == 0) {
      cuda::atomic_ref<std::int32_t, cuda::thread_scope_device> counter(arrivals[parent]);
      // acq_rel: the release publishes this node's payload; the acquire makes every sibling's
      // payload visible to the last arriver, since each earlier arriver's RMW heads a release
      // sequence that the later RMWs on this counter continue.
      arrived = counter.fetch_add(1, cuda::std::memory_order_acq_rel);
      // Only the last arriver touches the counter after this, and the next run starts after a
      // kernel boundary, so a relaxed reset suffices.
      if (arrived == children - 1) counter.store(0, cuda::std::memory_order_relaxed);
    }
    arrived = g.from_first(arrived);
    if (arrived != children - 1) return;
    // The other lanes read siblings' payloads too: the warp barrier orders their loads after the
    // first lane's acquire (a shuffle alone does not order memory).
    g.sync();
    r = group_merge<G, Batch>(g, out + __ldg(tree.first_child + parent), children, load_through_l2{});
    node = parent;
  }
}

}  // namespace canopy::bench::detail
