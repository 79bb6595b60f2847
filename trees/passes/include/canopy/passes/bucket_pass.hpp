// SPDX-License-Identifier: Apache-2.0
// The octree upward pass with bucket tasks: the bottom of the tree in tasks sized by points.
//
// A *bucket* is a run of consecutive small sibling subtrees (each holding at most `bucket_points`
// points, together at most `bucket_points`), so its points are one contiguous Morton-ordered range.
// One task computes the whole bucket on a warp: the warp copies the bucket's points into shared
// memory at once (cp.async: every load of the bucket in flight together, no registers held),
// computes its leaves from there, `LeafLanes` lanes a leaf (one lane a leaf by default: 32 leaves
// a step, whatever their sizes), then its internal nodes wave by wave (height 1, 2, ...) by 8-lane
// groups from the payloads it has just written: no dependency counter and no queue round trip
// inside a bucket. Only the *big* nodes (more than bucket_points points) are tasks of their own,
// merged when their children's tasks are done; a big leaf (a leaf larger than bucket_points,
// possible with max_depth or a large max_leaf) is a P2M task of the whole warp. The tree client
// picks the granularity: upward_options::bucket_points (at most 256 on the GPU).
//
// Where it stands: correct on every tree and mode, but not faster than twig tasks, which stay the
// default (the timings and profiles are in bench/RESULTS.md). It issues more instructions than the
// twig pass for the same work and stalls on the same block barrier and L2 round trips, so it wins
// nothing back. Two earlier versions are in the history (commit 6205379: the leaves' points
// balanced exactly over the lanes, 8 a lane, a segmented scan of the pieces of leaves that cross
// lanes; slower still, issue-bound on the scan's shuffles).
//
// Task data (one int32 array, uploaded once; `blob` below):
//   blob[4t .. 4t + 3]  task t, four ints (read as one int4 on the GPU):
//       a big node:  {node, first_child, child_count, 0}          (child_count 0: a big leaf)
//       a bucket:    {~point_begin, point_end, list, list_end}    (~point_begin < 0)
//   blob[list]       a bucket's leaf count L; its L leaves in Morton order as (node, first point
//                    from the bucket's first), then (-1, the bucket's point count); its internal nodes
//                    wave by wave: a count W and W (node, first_child, child_count), until list_end.
//                    Everything a step reads is in one place: no load waits for another's result.
//
//   const bucket_graph bg = make_bucket_graph(tree, 256);              // host, O(nodes)
//   canopy::device_buffer<std::int32_t> blob(bg.blob);                  // upload
//   bucket_upward_ops<float, 1> ops{blob.data(), {points, first_child, child_count, point_begin,
//                                                 point_count, payload}};
//   scheduler.run(ops);                                                 // a scheduler over bg.graph
// (upward_runner.hpp does all of this for a tree, on either backend: pass_tasks::bucket.)
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "canopy/config.hpp"
#include "canopy/task_graph.hpp"
#include "canopy/trees/multipole.hpp"
#include "canopy/trees/octree.hpp"
#include "canopy/trees/payload_policy.hpp"
#include "canopy/passes/upward_pass.hpp"

#if defined(__CUDACC__)
#include <cuda_pipeline.h>

#include "canopy/lane_group.cuh"
#include "canopy/prefetch.cuh"
#include "canopy/passes/group_multipole.cuh"
#include "canopy/passes/group_payload.cuh"
#endif

namespace canopy::trees {

/// The points per bucket when the caller does not choose (upward_options::bucket_points == 0):
/// 128, or 256 for trees of 4M points and more. Fewer, larger buckets leave warps idle on small
/// trees; smaller ones make more big-node tasks.
int default_bucket_points(std::int64_t points);

/// The bucket decomposition of a tree: the task graph and the task data.
struct bucket_graph {
  task_graph graph;
  std::vector<std::int32_t> blob;  ///< the records, then the buckets' lists (see the header comment)
  std::int32_t bucket_count = 0;
  std::int32_t big_count = 0;      ///< big-node tasks (merges and big leaves)
  std::int32_t max_waves = 0;      ///< the most internal levels in one bucket
};

/// Builds the bucket decomposition of `tree` with at most `bucket_points` (>= 1) points a bucket.
/// Reads first_child, child_count, point_begin and point_count only: node 0 is the root.
/// Throws std::invalid_argument for bucket_points < 1.
bucket_graph make_bucket_graph(const octree& tree, int bucket_points);

/// A bucket or big-node task on one thread (the CPU backend, the warp-master modes).
/// `Payload`: a payload policy, or float / double for the multipole payload (upward_pass.hpp).
template <class Payload>
CANOPY_HD void bucket_task_serial(const upward_arrays<Payload>& a, const std::int32_t* blob, task_id t,
                                  const as_payload_policy_t<Payload>& policy = {}) {
  const std::int32_t* rec = blob + 4 * static_cast<std::int64_t>(t);
  if (rec[0] >= 0) {  // a big node: a merge, or a big leaf's P2M
    upward_ops<Payload>{a, policy}(rec[0]);
    return;
  }
  const std::int32_t begin = ~rec[0], list = rec[2], list_end = rec[3];
  const std::int32_t leaves = blob[list];
  for (std::int32_t i = 0; i < leaves; ++i) {
    const std::int32_t* leaf = blob + list + 1 + 2 * i;  // node, first point (from the bucket's), next's
    a.payload[leaf[0]] = policy.leaf(leaf[0], a.points + begin + leaf[1], leaf[3] - leaf[1]);
  }
  for (std::int32_t pos = list + 3 + 2 * leaves; pos < list_end;) {
    const std::int32_t wave = blob[pos++];
    for (std::int32_t i = 0; i < wave; ++i) upward_ops<Payload>{a, policy}(blob[pos + 3 * i]);
    pos += 3 * wave;
  }
}

/// Ops for a scheduler over bucket_graph::graph. A task runs on a warp (group_size 32), a leaf on
/// `LeafLanes` of its lanes (1 measured best on adaptive trees, 2 on complete ones with 8-point
/// leaves); the warp-master modes and the CPU backend run a task on one thread
/// (bucket_task_serial). Blocks of at most max_warps warps (upward_runner checks).
template <class Payload = float, int LeafLanes = 1>
struct bucket_upward_ops {
  using policy_type = as_payload_policy_t<Payload>;
  using value_type = typename policy_type::value_type;
  static_assert(detail::checked_payload_policy<policy_type>());
  static_assert(LeafLanes == 1 || LeafLanes == 2 || LeafLanes == 4 || LeafLanes == 8, "LeafLanes: 1, 2, 4 or 8");
  static constexpr int group_size = 32;
  /// Bucket graphs are trees: the kernel needs no DAG paths (canopy/detail/dependency.hpp).
  static constexpr bool tree_only = true;
  /// The GPU stages a bucket's points in shared memory: at most this many points a bucket, and at
  /// most max_warps warps a block (128 threads): 16 KB of shared memory a block.
  static constexpr int max_bucket_points = 256;
  static constexpr int max_warps = 4;

  const std::int32_t* blob;
  upward_arrays<Payload> arrays;
  policy_type policy{};

  CANOPY_HD void operator()(task_id t) const { bucket_task_serial<Payload>(arrays, blob, t, policy); }

#if defined(__CUDACC__)
  template <int G>
  __device__ void operator()(task_id t, const lane_group<G>& g) const {
    if constexpr (G != 32) {
      if (g.rank == 0) (*this)(t);
    } else {
      using group_ops = group_payload<policy_type>;
      const int4 rec = __ldg(reinterpret_cast<const int4*>(blob) + t);
      if (rec.x >= 0) {
        if (rec.z == 0) {  // a big leaf: many points, the whole warp
          group_ops::store(g, arrays.payload + rec.x,
                           group_ops::leaf(policy, g, rec.x,
                                           reinterpret_cast<const float4*>(arrays.points + __ldg(arrays.point_begin + rec.x)),
                                           __ldg(arrays.point_count + rec.x), load_points_ldg{}));
        } else if (g.rank < 8) {
          // At most 8 children: 8 lanes combine in 3 butterfly steps where the warp would take 5
          // (a warp issues an instruction once however few of its lanes are active).
          const lane_group<8> eight = lane_group<8>::here();
          group_ops::store(eight, arrays.payload + rec.x,
                           group_ops::template children<8, 1>(policy, eight, rec.x, arrays.payload, rec.y, rec.z));
        }
        return;
      }
      run_bucket(~rec.x, rec.y, rec.z, rec.w, g);
    }
  }

  /// The scheduler's hints (canopy/prefetch.cuh): `structure`, the task's record into L1; `data`,
  /// a bucket's points into L2 (one bulk prefetch), so that the next bucket of a group's share
  /// streams in while the group runs this one. A big node gets no data hint.
  __device__ void prefetch(task_id t, prefetch_stage stage) const {
    const int4* rec = reinterpret_cast<const int4*>(blob) + t;
    if (stage == prefetch_stage::structure) {
      prefetch_l1(rec, sizeof(int4));
      return;
    }
    const int4 r = __ldg(rec);
    if (r.x < 0 && r.y > ~r.x)
      prefetch_l2(arrays.points + ~r.x, static_cast<std::uint32_t>(r.y - ~r.x) * sizeof(point));
  }

 private:
  /// A bucket: points [begin, end) staged in shared memory, its leaves from there, then its
  /// internal nodes.
  __device__ void run_bucket(std::int32_t begin, std::int32_t end, std::int32_t list, std::int32_t list_end,
                             const lane_group<32>& g) const {
    __shared__ float4 stage[max_warps][max_bucket_points];
    const int lane = g.rank;
    using group_ops = group_payload<policy_type>;
    float4* staged = stage[threadIdx.x >> 5];
    value_type* payload = arrays.payload;
    // Every load of the bucket's points at once, straight into shared memory (cp.async: no
    // registers held): the warp's bytes in flight are the whole bucket, not a leaf's. The barrier
    // first: the warp's previous task may still read the buffer.
    g.sync();
    const float4* src = reinterpret_cast<const float4*>(arrays.points) + begin;
    for (std::int32_t i = lane; i < end - begin; i += 32) __pipeline_memcpy_async(staged + i, src + i, sizeof(float4));
    __pipeline_commit();
    // The leaves, 32 / LeafLanes at a time; their records load while the points are on their way.
    constexpr int per_step = 32 / LeafLanes;
    const lane_group<LeafLanes> leaf_lanes = lane_group<LeafLanes>::here();
    const std::int32_t leaves = __ldg(blob + list);
    const std::int32_t* leaf_records = blob + list + 1;
    bool waited = false;
    for (std::int32_t i = lane / LeafLanes; i - lane / LeafLanes < leaves; i += per_step) {
      std::int32_t node = 0, first = 0, count = 0;
      if (i < leaves) {
        node = __ldg(leaf_records + 2 * i);
        first = __ldg(leaf_records + 2 * i + 1);
        count = __ldg(leaf_records + 2 * i + 3) - first;
      }
      if (!waited) {
        __pipeline_wait_prior(0);
        g.sync();  // every lane's copies have landed
        waited = true;
      }
      if (i < leaves)
        group_ops::store(leaf_lanes, payload + node,
                         group_ops::leaf(policy, leaf_lanes, node, staged + first, count, load_points_plain{}));
    }
    if (!waited) __pipeline_wait_prior(0);

    // The internal nodes, wave by wave, from the leaves and nodes this warp just wrote: 8 lanes a
    // node. __syncwarp orders the writes of one wave before the reads of the next.
    const int sub = lane >> 3;
    const lane_group<8> eight = lane_group<8>::here();
    for (std::int32_t pos = list + 3 + 2 * leaves; pos < list_end;) {
      const std::int32_t wave = __ldg(blob + pos);
      g.sync();
      for (std::int32_t i = sub; i - sub < wave; i += 4) {
        if (i < wave) {
          const std::int32_t* rec = blob + pos + 1 + 3 * i;
          const std::int32_t node = __ldg(rec), first_child = __ldg(rec + 1), children = __ldg(rec + 2);
          group_ops::store(eight, payload + node,
                           group_ops::template children<8, 1>(policy, eight, node, payload, first_child, children));
        }
      }
      pos += 1 + 3 * wave;
    }
  }
#endif
};
static_assert(std::is_trivially_copyable_v<bucket_upward_ops<float>>);
static_assert(std::is_trivially_copyable_v<bucket_upward_ops<double>>);

}  // namespace canopy::trees
