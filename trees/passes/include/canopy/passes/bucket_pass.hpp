// The octree upward pass with bucket tasks: work balanced by points, not by nodes.
//
// A *bucket* is a run of consecutive small sibling subtrees (each holding at most `bucket_points`
// points, together at most `bucket_points`), so its points are one contiguous Morton-ordered range.
// One task computes the whole bucket on a warp: the lanes walk the range 4 consecutive points each
// (128 points a round, every lane busy whatever the leaf sizes), a segmented reduction by leaf
// gives every leaf's moments (a leaf that crosses lanes is combined by a segmented scan of the
// lanes' open pieces), and the internal nodes inside the bucket are then merged wave by wave
// (height 1, 2, ...) by 8-lane groups, from payloads this warp has just written: no dependency
// counter, no queue round trip inside a bucket. Only the *big* nodes (more than bucket_points
// points) are tasks of their own, merged when their children's tasks are done; a big leaf (a leaf
// larger than bucket_points, possible with max_depth or a large max_leaf) is a P2M task.
//
// Why: an adaptive tree's leaves hold 1 to max_leaf points and sit many levels apart, so work
// assigned per node or per twig leaves lanes idle (a 2-point leaf on a group sized for 10) and
// pays a dependent L2 round trip per level of the bottom of the tree; a bucket pays one per round
// of 128 points and one per internal level, all on one SM (bench/RESULTS.md, eleventh session).
//
// Task data (one int32 array, uploaded once; `blob` below):
//   blob[0]          the offset of the leaf-start bitmap (bit p: point p starts a leaf)
//   blob[4 + 4t ..]  task t as four ints (bucket_task):
//       a big node:  {node, first_child, child_count, 0}          (child_count 0: a big leaf)
//       a bucket:    {~point_begin, point_end, list, list_end}    (~point_begin < 0)
//   blob[list]       a bucket's leaf count L, its L leaves in Morton order, then its internal
//                    nodes wave by wave: a count W and W nodes, until list_end.
//
//   const bucket_graph bg = make_bucket_graph(tree, 512);              // host, O(nodes + points/32)
//   canopy::device_buffer<std::int32_t> blob(bg.blob);                  // upload
//   bucket_upward_ops<float> ops{blob.data(), {points, first_child, child_count, point_begin,
//                                              point_count, payload}};
//   scheduler.run(ops);                                                 // a scheduler over bg.graph
// (upward_runner.hpp does all of this for a tree, on either backend: pass_tasks::bucket.)
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "canopy/config.hpp"
#include "canopy/task_graph.hpp"
#include "canopy/trees/multipole.hpp"
#include "canopy/trees/octree.hpp"
#include "canopy/passes/upward_pass.hpp"

#if defined(__CUDACC__)
#include "canopy/lane_group.cuh"
#include "canopy/prefetch.cuh"
#include "canopy/passes/group_multipole.cuh"
#endif

namespace canopy::trees {

/// The points per bucket when the caller does not choose (upward_options::bucket_points == 0):
/// about four buckets per warp of a full H100 grid, between 128 and 1024 points (a power of two).
/// Fewer, larger buckets leave warps idle on small trees; smaller ones pay more rounds of the
/// bucket's fixed cost and more big-node tasks.
int default_bucket_points(std::int64_t points);

/// The bucket decomposition of a tree: the task graph and the task data.
struct bucket_graph {
  task_graph graph;
  std::vector<std::int32_t> blob;  ///< see the header comment
  std::int32_t bucket_count = 0;
  std::int32_t big_count = 0;      ///< big-node tasks (merges and big leaves)
  std::int32_t max_waves = 0;      ///< the most internal levels in one bucket
};

/// Builds the bucket decomposition of `tree` with at most `bucket_points` (>= 1) points a bucket.
/// Reads first_child, child_count, point_begin and point_count only (and the point count from
/// point_begin/point_count of the root): node 0 is the root. Throws std::invalid_argument for
/// bucket_points < 1.
bucket_graph make_bucket_graph(const octree& tree, int bucket_points);

/// The four ints of task t.
struct bucket_task {
  std::int32_t x, y, z, w;
  CANOPY_HD bool is_bucket() const { return x < 0; }
};
static_assert(sizeof(bucket_task) == 16 && std::is_trivially_copyable_v<bucket_task>);

/// A bucket or big-node task on one thread (the CPU backend, the warp-master modes).
template <class T>
CANOPY_HD void bucket_task_serial(const upward_arrays<T>& a, const std::int32_t* blob, task_id t) {
  const std::int32_t* rec = blob + 4 + 4 * static_cast<std::int64_t>(t);
  if (rec[0] >= 0) {  // a big node: a merge, or a big leaf's P2M
    upward_ops<T>{a}(rec[0]);
    return;
  }
  const std::int32_t list = rec[2], list_end = rec[3];
  const std::int32_t leaves = blob[list];
  for (std::int32_t i = 0; i < leaves; ++i) {
    const std::int32_t leaf = blob[list + 1 + i];
    a.payload[leaf] = p2m<T>(a.points + a.point_begin[leaf], a.point_count[leaf]);
  }
  for (std::int32_t pos = list + 1 + leaves; pos < list_end;) {
    const std::int32_t wave = blob[pos++];
    for (std::int32_t i = 0; i < wave; ++i) upward_ops<T>{a}(blob[pos + i]);
    pos += wave;
  }
}

#if defined(__CUDACC__)
namespace detail {

template <int G>
__device__ __forceinline__ multipole<float> shfl_up_multipole(const canopy::lane_group<G>& g, const multipole<float>& m,
                                                              int delta) {
  multipole<float> r;
  r.count = __shfl_up_sync(g.mask, m.count, delta);
  r.mass = __shfl_up_sync(g.mask, m.mass, delta);
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    r.com[i] = __shfl_up_sync(g.mask, m.com[i], delta);
    r.lo[i] = __shfl_up_sync(g.mask, m.lo[i], delta);
    r.hi[i] = __shfl_up_sync(g.mask, m.hi[i], delta);
  }
#pragma unroll
  for (int i = 0; i < 6; ++i) r.m2[i] = __shfl_up_sync(g.mask, m.m2[i], delta);
  return r;
}
__device__ __forceinline__ multipole<float> shfl_multipole(const multipole<float>& m, int lane) {
  multipole<float> r;
  r.count = __shfl_sync(0xffffffffu, m.count, lane);
  r.mass = __shfl_sync(0xffffffffu, m.mass, lane);
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    r.com[i] = __shfl_sync(0xffffffffu, m.com[i], lane);
    r.lo[i] = __shfl_sync(0xffffffffu, m.lo[i], lane);
    r.hi[i] = __shfl_sync(0xffffffffu, m.hi[i], lane);
  }
#pragma unroll
  for (int i = 0; i < 6; ++i) r.m2[i] = __shfl_sync(0xffffffffu, m.m2[i], lane);
  return r;
}

/// p2m<float> of p[0, n) on one lane, reading 16 bytes a point (L1 hits: the round's hint brought
/// them): mass, weighted centre and box first, then the central second moments about the finished
/// centre, exactly as p2m does; the unweighted centroid when the mass is 0.
__device__ __forceinline__ multipole<float> lane_p2m(const float4* p, int n) {
  multipole<float> r = multipole_identity<float>();
  if (n <= 0) return r;
  float mass = 0.f, sx = 0.f, sy = 0.f, sz = 0.f, cx = 0.f, cy = 0.f, cz = 0.f;
  for (int i = 0; i < n; ++i) {
    const float4 v = __ldca(p + i);
    mass += v.w;
    sx += v.w * v.x;
    sy += v.w * v.y;
    sz += v.w * v.z;
    cx += v.x;
    cy += v.y;
    cz += v.z;
    r.lo[0] = fminf(r.lo[0], v.x);
    r.lo[1] = fminf(r.lo[1], v.y);
    r.lo[2] = fminf(r.lo[2], v.z);
    r.hi[0] = fmaxf(r.hi[0], v.x);
    r.hi[1] = fmaxf(r.hi[1], v.y);
    r.hi[2] = fmaxf(r.hi[2], v.z);
  }
  r.count = static_cast<std::uint32_t>(n);
  r.mass = mass;
  if (!(mass > 0.f)) {  // massless: the unweighted centroid, m2 = 0 (multipole.hpp)
    r.com[0] = cx / static_cast<float>(n);
    r.com[1] = cy / static_cast<float>(n);
    r.com[2] = cz / static_cast<float>(n);
    return r;
  }
  const float inv = 1.f / mass;
  r.com[0] = sx * inv;
  r.com[1] = sy * inv;
  r.com[2] = sz * inv;
  float m2[6] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int i = 0; i < n; ++i) {
    const float4 v = __ldca(p + i);
    const float dx = v.x - r.com[0], dy = v.y - r.com[1], dz = v.z - r.com[2];
    m2[0] += v.w * dx * dx;
    m2[1] += v.w * dx * dy;
    m2[2] += v.w * dx * dz;
    m2[3] += v.w * dy * dy;
    m2[4] += v.w * dy * dz;
    m2[5] += v.w * dz * dz;
  }
#pragma unroll
  for (int j = 0; j < 6; ++j) r.m2[j] = m2[j];
  return r;
}

__device__ __forceinline__ void store_multipole(multipole<float>* p, const multipole<float>& m) { *p = m; }

/// Word `lane` of lane src's m (0 for lanes 17..31): a payload spread one word per lane.
__device__ __forceinline__ std::uint32_t word_from_lane(const multipole<float>& m, int src, int lane) {
  std::uint32_t mine = 0;
  [&]<int... W>(std::integer_sequence<int, W...>) {
    (([&] {
       const std::uint32_t t = __shfl_sync(0xffffffffu, multipole_word<W>(m), src);  // every lane shuffles
       if (lane == W) mine = t;
     }()),
     ...);
  }(std::make_integer_sequence<int, 17>{});
  return mine;
}

/// The payload whose word w lane w holds (lanes 0..16 of the warp).
__device__ __forceinline__ multipole<float> gather_words(std::uint32_t word) {
  std::uint32_t w[17];
#pragma unroll
  for (int i = 0; i < 17; ++i) w[i] = __shfl_sync(0xffffffffu, word, i);
  multipole<float> m;
  m.count = w[0];
  m.mass = __uint_as_float(w[1]);
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    m.com[i] = __uint_as_float(w[2 + i]);
    m.lo[i] = __uint_as_float(w[11 + i]);
    m.hi[i] = __uint_as_float(w[14 + i]);
  }
#pragma unroll
  for (int i = 0; i < 6; ++i) m.m2[i] = __uint_as_float(w[5 + i]);
  return m;
}

}  // namespace detail
#endif

/// Ops for a scheduler over bucket_graph::graph. A task runs on a warp (group_size 32); the
/// warp-master modes and the CPU backend run it on one thread (bucket_task_serial).
template <class T>
struct bucket_upward_ops {
  static constexpr int group_size = 32;
  /// Points a lane takes per round (256 points a round): each scan of the lanes' open pieces then
  /// serves twice the points of 4 per lane (bench/RESULTS.md, eleventh session).
  static constexpr int lane_points = 8;

  const std::int32_t* blob;
  upward_arrays<T> arrays;

  CANOPY_HD void operator()(task_id t) const { bucket_task_serial<T>(arrays, blob, t); }

#if defined(__CUDACC__)
  template <int G>
  __device__ void operator()(task_id t, const lane_group<G>& g) const {
    if constexpr (!std::is_same_v<T, float> || G != 32) {
      if (g.rank == 0) (*this)(t);
    } else {
      const int4 rec = __ldg(reinterpret_cast<const int4*>(blob) + 1 + t);
      if (rec.x >= 0) {
        multipole<float> r;
        if (rec.z == 0) r = group_p2m(g, arrays.points + __ldg(arrays.point_begin + rec.x), __ldg(arrays.point_count + rec.x));
        else r = group_merge<G, 1>(g, arrays.payload + rec.y, rec.z, load_through_l2{});  // children from other SMs
        group_store(g, arrays.payload + rec.x, r);
        return;
      }
      run_bucket(~rec.x, rec.y, rec.z, rec.w, g);
    }
  }

  /// The scheduler's hints (canopy/prefetch.cuh): `structure`, the task's record into L1; `data`,
  /// a bucket's points into L2 (one bulk prefetch), so that the next bucket of a group's share
  /// streams in while the group runs this one. A big node gets no data hint.
  __device__ void prefetch(task_id t, prefetch_stage stage) const {
    const int4* rec = reinterpret_cast<const int4*>(blob) + 1 + t;
    if (stage == prefetch_stage::structure) {
      prefetch_l1(rec, sizeof(int4));
      return;
    }
    const int4 r = __ldg(rec);
    if (r.x < 0 && r.y > ~r.x)
      prefetch_l2(arrays.points + ~r.x, static_cast<std::uint32_t>(r.y - ~r.x) * sizeof(point));
  }

 private:
  /// The leaves of points [begin, end) (lists at blob[list]), then the bucket's internal nodes.
  __device__ void run_bucket(std::int32_t begin, std::int32_t end, std::int32_t list, std::int32_t list_end,
                             const lane_group<32>& g) const {
    constexpr int K = lane_points;
    const int lane = g.rank;
    const std::uint32_t* bitmap = reinterpret_cast<const std::uint32_t*>(blob + __ldg(blob));
    const std::int32_t* leaf_ids = blob + list + 1;
    const float4* p4 = reinterpret_cast<const float4*>(arrays.points);
    multipole<float>* payload = arrays.payload;

    if (begin == end) {  // an empty tree's root: its leaves (the root alone) hold no point
      for (std::int32_t i = lane; i < __ldg(blob + list); i += 32)
        detail::store_multipole(payload + __ldg(leaf_ids + i), multipole_identity<float>());
    }
    // The leaf piece still open after the rounds so far, one word per lane (lane w holds word w):
    // a whole payload in every lane would cost 17 registers through the round, and the kernel
    // runs at 64.
    std::uint32_t carry_word = multipole_word_at<0, 32>(multipole_identity<float>(), lane);
    std::int32_t heads_before = 0;  // leaves started in the rounds before
    for (std::int32_t base = begin; base < end; base += 32 * K) {
      const std::int32_t p0 = base + lane * K;
      const std::int32_t valid = end - p0 < 0 ? 0 : end - p0 > K ? K : end - p0;
      // My points are read by the part that needs them (the open piece before the scan, the rest
      // after), twice each (p2m's two passes): held in registers through the scan they made the
      // kernel spill. The hint starts them into L1 now, beside the bitmap's round trip and the scans.
      if (valid > 0) prefetch_l1(p4 + p0, static_cast<std::uint32_t>(valid) * sizeof(float4));
      // Bits 0..K: whether point p0 + q starts a leaf; every position at or past `end` counts as
      // a start (a piece that reaches it is finished).
      std::uint32_t bits = ~0u;
      if (valid > 0) {
        const std::uint32_t w0 = __ldg(bitmap + (p0 >> 5)), w1 = __ldg(bitmap + (p0 >> 5) + 1);
        const std::uint64_t both = (static_cast<std::uint64_t>(w1) << 32) | w0;
        bits = static_cast<std::uint32_t>(both >> (p0 & 31));
        if (valid < K) bits |= ~((1u << valid) - 1u);  // bit K itself comes from the bitmap when all K are mine
      }
      const std::uint32_t mine = bits & ((1u << valid) - 1u);  // leaf starts among my points
      const bool open = valid > 0 && !((bits >> K) & 1u);    // my last piece goes on after my range
      const int last_start = mine == 0 ? -1 : 31 - __clz(mine);
      // Leaves started before my first point: an exclusive scan of the lanes' start counts.
      int incl = __popc(mine);
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(g.mask, incl, o);
        if (lane >= o) incl += y;
      }
      const std::int32_t before = heads_before + incl - __popc(mine);
      heads_before += __shfl_sync(g.mask, incl, 31);

      // The open pieces, combined by a segmented inclusive scan over the lanes: a lane whose open
      // piece starts in it, or that has none, begins a segment. x: the open leaf's moments from
      // its start (in this round) up to the end of my range.
      const int open_from = last_start < 0 ? 0 : last_start;
      multipole<float> x = open ? detail::lane_p2m(p4 + p0 + open_from, valid - open_from) : multipole_identity<float>();
      bool reset = !open || last_start >= 0;
      // A leaf spans few lanes (max_leaf / 8 + 2): the scan stops once every lane has met a start.
      for (int o = 1; o < 32 && g.any(!reset); o <<= 1) {
        const multipole<float> y = detail::shfl_up_multipole(g, x, o);
        const bool y_reset = __shfl_up_sync(g.mask, reset, o);
        if (lane >= o) {
          if (!reset) x = m2m_merge(y, x);
          reset = reset || y_reset;
        }
      }
      // No segment start from lane 0 up to me: the open piece of the rounds before comes first.
      multipole<float> in;
      {
        const multipole<float> carry = detail::gather_words(carry_word);
        if (!reset) x = m2m_merge(carry, x);
        carry_word = detail::word_from_lane(x, 31, lane);  // lane 31's x is what is still open
        in = detail::shfl_up_multipole(g, x, 1);
        if (lane == 0) in = carry;
      }
      // My pieces up to the open one (or to the end of my range): the one before my first start
      // finishes the leaf that `in` holds the start of; a piece between two starts is a whole leaf.
      const int stop = !open ? valid : open_from;
      for (int from = 0, q = 1; q <= stop; ++q) {
        if (q < stop && !((bits >> q) & 1u)) continue;
        multipole<float> m = detail::lane_p2m(p4 + p0 + from, q - from);
        std::int32_t leaf;
        if (from == 0 && !(bits & 1u)) {
          m = m2m_merge(in, m);
          leaf = before - 1;
        } else {
          leaf = before + __popc(mine & ((1u << from) - 1u));
        }
        detail::store_multipole(payload + __ldg(leaf_ids + leaf), m);
        from = q;
      }
    }

    // The internal nodes, wave by wave, from the leaves and nodes this warp just wrote: 8 lanes a
    // node. __syncwarp orders the writes of one wave before the reads of the next.
    const int sub = lane >> 3;
    const lane_group<8> eight = lane_group<8>::here();
    for (std::int32_t pos = list + 1 + __ldg(blob + list); pos < list_end;) {
      const std::int32_t wave = __ldg(blob + pos);
      g.sync();
      for (std::int32_t i = sub; i - sub < wave; i += 4) {
        if (i < wave) {
          const std::int32_t node = __ldg(blob + pos + 1 + i);
          const multipole<float> r = group_merge<8, 1>(eight, payload + __ldg(arrays.first_child + node),
                                                       __ldg(arrays.child_count + node), load_through_l2{});
          group_store(eight, payload + node, r);
        }
      }
      pos += 1 + wave;
    }
  }
#endif
};
static_assert(std::is_trivially_copyable_v<bucket_upward_ops<float>>);
static_assert(std::is_trivially_copyable_v<bucket_upward_ops<double>>);

}  // namespace canopy::trees
