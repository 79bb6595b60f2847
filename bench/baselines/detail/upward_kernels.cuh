// Kernels of the upward-pass baselines (nvcc only; included by baselines.cu).
//
// Work unit: a *lane group* of G consecutive lanes of one warp (G = 1, 2, ..., 32) computes one
// node. For a leaf the G lanes read the leaf's points interleaved (lane r takes points r, r + G,
// ...), so a group reads 16 G contiguous bytes per step and, because leaves are laid out in Morton
// order (increasing point_begin), a warp's 32 / G groups read neighbouring ranges: with G = 8 every
// step of a warp is four full 128-byte lines. For an internal node lane r merges children r, r + G,
// ...; the lanes' partial moments are then combined with xor shuffles.
//
// Every lane of a group ends with the bitwise same result: sums combine commutatively
// (a + b == b + a in IEEE arithmetic) and merges are taken in a canonical order (the lower lane's
// moments first), so lanes agree on branches such as `mass > 0` and any lane may publish.
#pragma once

#if !defined(__CUDACC__)
#error "baselines/detail/upward_kernels.cuh needs nvcc"
#endif

#include <canopy/trees/device_octree.cuh>
#include <canopy/trees/multipole.hpp>
#include <canopy/trees/point.hpp>

#include <cuda/atomic>

#include <cstdint>

namespace canopy::bench::detail {

using trees::multipole;
using trees::octree_ref;
using trees::point;

inline constexpr int block_size = 256;

// G consecutive lanes of the calling warp, aligned to G (blocks are one-dimensional with a
// multiple of 32 threads, so the lane is threadIdx.x % 32).
template <int G>
struct lane_group {
  static_assert(G == 1 || G == 2 || G == 4 || G == 8 || G == 16 || G == 32, "G must be a power of two <= 32");
  unsigned mask;
  int rank;  // 0 .. G-1

  __device__ static lane_group here() {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    lane_group g;
    g.rank = lane & (G - 1);
    g.mask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (lane & ~(G - 1));
    return g;
  }
  // __syncwarp orders memory among the lanes it synchronises (CUDA Programming Guide, "Warp
  // synchronisation"), which the last-arriver kernel needs after one lane's acquire.
  __device__ void sync() const {
    if constexpr (G > 1) __syncwarp(mask);
  }
  template <class T>
  __device__ T exchange(T value, int lane_mask) const {
    if constexpr (G > 1) return __shfl_xor_sync(mask, value, lane_mask);
    else return value;
  }
  template <class T>
  __device__ T from_first(T value) const {
    if constexpr (G > 1) return __shfl_sync(mask, value, 0, G);
    else return value;
  }
};

template <int G>
__device__ __forceinline__ float group_sum(const lane_group<G>& g, float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o /= 2) v += g.exchange(v, o);
  return v;
}
template <int G>
__device__ __forceinline__ float group_min(const lane_group<G>& g, float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o /= 2) v = trees::detail::smaller(v, g.exchange(v, o));
  return v;
}
template <int G>
__device__ __forceinline__ float group_max(const lane_group<G>& g, float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o /= 2) v = trees::detail::larger(v, g.exchange(v, o));
  return v;
}

template <int G>
__device__ __forceinline__ multipole<float> exchange_multipole(const lane_group<G>& g, const multipole<float>& m,
                                                               int lane_mask) {
  multipole<float> r;
  r.count = g.exchange(m.count, lane_mask);
  r.mass = g.exchange(m.mass, lane_mask);
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    r.com[i] = g.exchange(m.com[i], lane_mask);
    r.lo[i] = g.exchange(m.lo[i], lane_mask);
    r.hi[i] = g.exchange(m.hi[i], lane_mask);
  }
#pragma unroll
  for (int i = 0; i < 6; ++i) r.m2[i] = g.exchange(m.m2[i], lane_mask);
  return r;
}

// P2M of pts[0, n) by the G lanes of g; the same as trees::p2m<float> (two passes: mass, com and
// box, then central second moments about the finished com; the unweighted centroid when the mass
// is 0) up to summation order, which compare_payloads' bounds allow. Points are read-only for the
// whole kernel, so the read-only path (__ldg) is safe; each lane keeps its first `held` points in
// registers for the second pass, so leaves of up to held * G points are read from memory once.
template <int G>
__device__ multipole<float> group_p2m(const lane_group<G>& g, const point* pts, std::int32_t n) {
  constexpr int held = 4;
  multipole<float> r = trees::multipole_identity<float>();
  if (n <= 0) return r;
  // point is alignas(16) and 16 bytes: one 128-bit load each.
  const float4* p4 = reinterpret_cast<const float4*>(pts);
  float4 cache[held];
  float mass = 0.f, sx = 0.f, sy = 0.f, sz = 0.f;
  float lo[3] = {r.lo[0], r.lo[1], r.lo[2]}, hi[3] = {r.hi[0], r.hi[1], r.hi[2]};
  auto first_pass = [&](const float4& v) {
    mass += v.w;
    sx += v.w * v.x;
    sy += v.w * v.y;
    sz += v.w * v.z;
    lo[0] = trees::detail::smaller(lo[0], v.x);
    lo[1] = trees::detail::smaller(lo[1], v.y);
    lo[2] = trees::detail::smaller(lo[2], v.z);
    hi[0] = trees::detail::larger(hi[0], v.x);
    hi[1] = trees::detail::larger(hi[1], v.y);
    hi[2] = trees::detail::larger(hi[2], v.z);
  };
#pragma unroll
  for (int k = 0; k < held; ++k) {
    const std::int32_t i = g.rank + k * G;
    cache[k] = i < n ? __ldg(p4 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    if (i < n) first_pass(cache[k]);
  }
  for (std::int32_t i = g.rank + held * G; i < n; i += G) first_pass(__ldg(p4 + i));

  r.count = static_cast<std::uint32_t>(n);
  r.mass = mass = group_sum(g, mass);
  sx = group_sum(g, sx);
  sy = group_sum(g, sy);
  sz = group_sum(g, sz);
#pragma unroll
  for (int d = 0; d < 3; ++d) {
    r.lo[d] = group_min(g, lo[d]);
    r.hi[d] = group_max(g, hi[d]);
  }
  if (!(mass > 0.f)) {
    // Massless leaf: the unweighted centroid, m2 = 0 (multipole.hpp). Rare, so it re-reads.
    float cx = 0.f, cy = 0.f, cz = 0.f;
    for (std::int32_t i = g.rank; i < n; i += G) {
      const float4 v = __ldg(p4 + i);
      cx += v.x;
      cy += v.y;
      cz += v.z;
    }
    r.com[0] = group_sum(g, cx) / static_cast<float>(n);
    r.com[1] = group_sum(g, cy) / static_cast<float>(n);
    r.com[2] = group_sum(g, cz) / static_cast<float>(n);
    return r;
  }
  r.com[0] = sx / mass;
  r.com[1] = sy / mass;
  r.com[2] = sz / mass;

  float m2[6] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  auto second_pass = [&](const float4& v) {
    const float dx = v.x - r.com[0], dy = v.y - r.com[1], dz = v.z - r.com[2];
    m2[0] += v.w * dx * dx;
    m2[1] += v.w * dx * dy;
    m2[2] += v.w * dx * dz;
    m2[3] += v.w * dy * dy;
    m2[4] += v.w * dy * dz;
    m2[5] += v.w * dz * dz;
  };
#pragma unroll
  for (int k = 0; k < held; ++k)
    if (g.rank + k * G < n) second_pass(cache[k]);
  for (std::int32_t i = g.rank + held * G; i < n; i += G) second_pass(__ldg(p4 + i));
#pragma unroll
  for (int j = 0; j < 6; ++j) r.m2[j] = group_sum(g, m2[j]);
  return r;
}

// Children a lane of a G-lane group merges (an octree node has at most 8), hence the largest
// useful batch of loads per lane.
template <int G>
inline constexpr int children_per_lane = G >= 8 ? 1 : 8 / G;

// M2M of children[0, count) by the G lanes of g. `load(const multipole<float>*)` reads one child's
// payload. Each lane first issues the loads of a batch of up to Batch children, then merges them:
// Batch loads in flight instead of a chain of dependent round trips, which is what a node near the
// root (on the critical path, nothing else to run) needs; but each payload held costs 17
// registers, which lowers occupancy where there are many nodes (the host picks Batch per launch).
template <int G, int Batch, class Load>
__device__ multipole<float> group_merge(const lane_group<G>& g, const multipole<float>* children, std::int32_t count,
                                        Load load) {
  static_assert(Batch >= 1 && Batch <= children_per_lane<G>, "Batch: 1 .. children per lane");
  constexpr int batch = Batch;
  multipole<float> acc = trees::multipole_identity<float>();
  for (std::int32_t base = 0; base < count; base += batch * G) {
    multipole<float> got[batch];
#pragma unroll
    for (int j = 0; j < batch; ++j) {
      const std::int32_t c = base + g.rank + j * G;
      got[j] = c < count ? load(children + c) : trees::multipole_identity<float>();
    }
#pragma unroll
    for (int j = 0; j < batch; ++j) acc = trees::m2m_merge(acc, got[j]);  // identity merges are exact no-ops
  }
  // Canonical order: both partners compute merge(lower lane's, upper lane's), so they agree bitwise.
#pragma unroll
  for (int o = G / 2; o > 0; o /= 2) {
    const multipole<float> other = exchange_multipole(g, acc, o);
    acc = (g.rank & o) != 0 ? trees::m2m_merge(other, acc) : trees::m2m_merge(acc, other);
  }
  return acc;
}

// Plain load: children written by an earlier kernel launch (the launch boundary publishes them).
struct load_plain {
  __device__ multipole<float> operator()(const multipole<float>* p) const { return *p; }
};

// Load through L2 only (ld.global.cg): children written during this kernel by other SMs. The
// acquire on the arrival counter orders these loads after the children's writes, but a load that
// hits a line left in this SM's L1 before the acquire could still return old data; that is the
// intermittent wrong-result bug of ArborX #574 and Axom #307, seen more often on large inputs.
// Payloads written in this kernel are therefore never read through L1.
struct load_through_l2 {
  __device__ multipole<float> operator()(const multipole<float>* p) const {
    multipole<float> r;
    r.count = __ldcg(&p->count);
    r.mass = __ldcg(&p->mass);
#pragma unroll
    for (int i = 0; i < 3; ++i) {
      r.com[i] = __ldcg(&p->com[i]);
      r.lo[i] = __ldcg(&p->lo[i]);
      r.hi[i] = __ldcg(&p->hi[i]);
    }
#pragma unroll
    for (int i = 0; i < 6; ++i) r.m2[i] = __ldcg(&p->m2[i]);
    return r;
  }
};

// (a) One level of the bottom-up pass: every node of [begin, end) on this level, leaves by P2M and
// internal nodes by merging their children (computed by the previous launch). Adaptive trees have
// leaves on many levels, so one launch handles both kinds.
template <int G, int Batch>
__global__ void __launch_bounds__(block_size) level_kernel(octree_ref tree, std::int32_t begin, std::int32_t end,
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
  if (g.rank == 0) out[node] = r;
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
    // puts the write before the release.
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
