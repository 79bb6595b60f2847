// SPDX-License-Identifier: Apache-2.0
// Lane-group versions of P2M and M2M for device code: G lanes of one warp compute one node's
// moments together (canopy/lane_group.cuh). Used by the scheduler's octree client (the passes'
// group operators, through group_payload<multipole_policy<float>> at the end of this file) and by
// the baselines in bench/baselines.
//
// For a leaf the G lanes read the leaf's points interleaved (lane r takes points r, r + G, ...),
// so a group reads 16 G contiguous bytes per step and, because leaves are laid out in Morton
// order, a warp's 32 / G groups read neighbouring ranges: with G = 8 every step of a warp is four
// full 128-byte lines. For an internal node lane r merges children r, r + G, ...; the lanes'
// partial moments are then combined with xor shuffles.
//
// Every lane of a group ends with the bitwise same result (up to the sign of a zero in the box):
// lanes combine their partial moments with xor butterflies, which add the same two values in
// either order (a + b == b + a in IEEE arithmetic), so lanes agree on branches such as `mass > 0`
// and any lane may publish.
#pragma once

#if !defined(__CUDACC__)
#error "canopy/passes/group_multipole.cuh is device code: include it from .cu files only"
#endif

#include <canopy/lane_group.cuh>
#include <canopy/passes/group_payload.cuh>
#include <canopy/trees/multipole.hpp>
#include <canopy/trees/point.hpp>

#include <cstdint>
#include <utility>

namespace canopy::trees {

// How group_p2m_with reads a point: load_points_ldg (group_payload.cuh), the read-only path for
// points in global memory (points are read-only for the whole kernel, so __ldg is safe), or
// load_points_plain for points staged in shared memory (or anywhere a plain load reads).

// P2M of p4[0, n) by the G lanes of g, each point read with `load` (a load_points_* policy); the
// same as trees::p2m<float> up to rounding, which compare_payloads' bounds allow. One pass: the
// lanes sum mass, the mass-weighted offsets d = p - p0 and their products about the leaf's first
// point p0, and the central moments follow as sum(m d d^T) - M c c^T with c = sum(m d) / M. p0 is
// a point of the leaf, so |d| is at most the leaf's diagonal and the subtraction loses nothing
// that the bound (relative to m L^2, L >= the cell's edge) would notice. Each lane issues its
// loads `batch` at a time, so a lane has that many points in flight and reads each once (the
// two-pass version before 2026-11-26 waited for each point past its fourth, and read it twice).
// A massless leaf gets the unweighted centroid and m2 = 0 (multipole.hpp), re-reading its points.
template <int G, class Load>
__device__ multipole<float> group_p2m_with(const canopy::lane_group<G>& g, const float4* p4, std::int32_t n, Load load) {
  constexpr int batch = 4;
  multipole<float> r = multipole_identity<float>();
  if (n <= 0) return r;
  const float4 p0 = load(p4);
  float mass = 0.f, s[3] = {0.f, 0.f, 0.f}, q[6] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  float lo[3] = {r.lo[0], r.lo[1], r.lo[2]}, hi[3] = {r.hi[0], r.hi[1], r.hi[2]};
  for (std::int32_t base = g.rank; base < n; base += batch * G) {
    float4 v[batch];
#pragma unroll
    for (int k = 0; k < batch; ++k) {
      const std::int32_t i = base + k * G;
      v[k] = i < n ? load(p4 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int k = 0; k < batch; ++k) {
      // A slot past the leaf's end read nothing: p0 stands in for it (the box holds p0 already;
      // its weight is 0, so it adds nothing to the sums). Chosen here, after the loads, and not as
      // the loads' default: the compiler writes a default before the load, so a default of p0
      // would make every load of the batch wait for p0's, on the leaf tasks' critical path.
      const bool in = base + k * G < n;
      const float x = in ? v[k].x : p0.x, y = in ? v[k].y : p0.y, z = in ? v[k].z : p0.z, w = v[k].w;
      const float dx = x - p0.x, dy = y - p0.y, dz = z - p0.z;
      const float wx = w * dx, wy = w * dy, wz = w * dz;
      mass += w;
      s[0] += wx;
      s[1] += wy;
      s[2] += wz;
      q[0] += wx * dx;
      q[1] += wx * dy;
      q[2] += wx * dz;
      q[3] += wy * dy;
      q[4] += wy * dz;
      q[5] += wz * dz;
      lo[0] = canopy::smaller(lo[0], x);
      lo[1] = canopy::smaller(lo[1], y);
      lo[2] = canopy::smaller(lo[2], z);
      hi[0] = canopy::larger(hi[0], x);
      hi[1] = canopy::larger(hi[1], y);
      hi[2] = canopy::larger(hi[2], z);
    }
  }

  r.count = static_cast<std::uint32_t>(n);
  r.mass = mass = canopy::group_sum(g, mass);
#pragma unroll
  for (int d = 0; d < 3; ++d) {
    s[d] = canopy::group_sum(g, s[d]);
    r.lo[d] = canopy::group_min(g, lo[d]);
    r.hi[d] = canopy::group_max(g, hi[d]);
  }
#pragma unroll
  for (int j = 0; j < 6; ++j) q[j] = canopy::group_sum(g, q[j]);
  if (!(mass > 0.f)) {
    // Massless leaf: the unweighted centroid, m2 = 0 (multipole.hpp). Rare, so it re-reads.
    float cx = 0.f, cy = 0.f, cz = 0.f;
    for (std::int32_t i = g.rank; i < n; i += G) {
      const float4 v = load(p4 + i);
      cx += v.x;
      cy += v.y;
      cz += v.z;
    }
    r.com[0] = canopy::group_sum(g, cx) / static_cast<float>(n);
    r.com[1] = canopy::group_sum(g, cy) / static_cast<float>(n);
    r.com[2] = canopy::group_sum(g, cz) / static_cast<float>(n);
    return r;
  }
  // Three divisions, not a reciprocal: 1 / mass overflows for a denormal mass (the octree edge
  // cases' `denormals` tree), where s / mass is the ratio of two tiny numbers.
  const float c[3] = {s[0] / mass, s[1] / mass, s[2] / mass};  // com - p0
  r.com[0] = p0.x + c[0];
  r.com[1] = p0.y + c[1];
  r.com[2] = p0.z + c[2];
  r.m2[0] = q[0] - s[0] * c[0];
  r.m2[1] = q[1] - s[0] * c[1];
  r.m2[2] = q[2] - s[0] * c[2];
  r.m2[3] = q[3] - s[1] * c[1];
  r.m2[4] = q[4] - s[1] * c[2];
  r.m2[5] = q[5] - s[2] * c[2];
  return r;
}

// group_p2m_with over points in global memory (pts[0, n)).
template <int G>
__device__ multipole<float> group_p2m(const canopy::lane_group<G>& g, const point* pts, std::int32_t n) {
  // point is alignas(16) and 16 bytes: one 128-bit load each.
  return group_p2m_with(g, reinterpret_cast<const float4*>(pts), n, load_points_ldg{});
}

// The moments of the union of disjoint point sets, one per sub-group of Stride lanes of g (the
// lanes of a sub-group hold the same m): all at once instead of G / Stride - 1 pairwise m2m_merge
// steps. Mass, count, mass-weighted centre and box are butterfly sums / min / max over the
// sub-groups; the second moments are then summed about the finished centre (parallel axis:
// m2 + mass * d d^T for d = com - centre). Only a few values are in flight besides m, where a
// pairwise merge holds two payloads (34 registers): the twig kernel spilled at 64 registers with
// it. Every lane ends with the bitwise same result (xor butterflies add the same two values in
// either order), up to the sign of a zero in the box (min/max keep either of -0 and +0). Massless
// sets are weighted by their point counts when the union is massless, as m2m_merge does; empty
// sets (count 0) add nothing. Unlike m2m_merge, a union of one non-empty set is not returned bit
// for bit: its centre is (M c) * (1 / M), within two ulps of c, so a chain of single-child nodes
// may drift by a few ulps a level (well inside compare_payloads' bounds). Returning the lone set exactly
// takes one more butterfly and a branch, and the registers they cost slowed the twig pass
// markedly (bench/RESULTS.md), so it is not done.
template <int Stride, int G>
__device__ multipole<float> group_combine(const canopy::lane_group<G>& g, const multipole<float>& m) {
  static_assert(Stride >= 1 && Stride <= G, "Stride: 1 .. G");
  auto sum = [&](auto v) { return canopy::group_sum<Stride>(g, v); };
  multipole<float> r;
  r.count = sum(m.count);
  r.mass = sum(m.mass);
  const bool massive = r.mass > 0.f;
  const float w = massive ? m.mass : static_cast<float>(m.count);
  const float total = massive ? r.mass : static_cast<float>(r.count);
  // One division, not three: a twig task's combine is the hottest line of its pass (its profile
  // is in bench/RESULTS.md); the centre moves by an ulp.
  const float inv_total = r.count == 0 ? 0.f : 1.f / total;
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    r.com[i] = sum(m.count == 0 ? 0.f : w * m.com[i]) * inv_total;
    r.lo[i] = canopy::group_min<Stride>(g, m.lo[i]);
    r.hi[i] = canopy::group_max<Stride>(g, m.hi[i]);
  }
  const float d[3] = {m.com[0] - r.com[0], m.com[1] - r.com[1], m.com[2] - r.com[2]};
  const float a = m.count == 0 ? 0.f : m.mass;  // an empty set's com is not a position
  r.m2[0] = sum(m.m2[0] + a * d[0] * d[0]);
  r.m2[1] = sum(m.m2[1] + a * d[0] * d[1]);
  r.m2[2] = sum(m.m2[2] + a * d[0] * d[2]);
  r.m2[3] = sum(m.m2[3] + a * d[1] * d[1]);
  r.m2[4] = sum(m.m2[4] + a * d[1] * d[2]);
  r.m2[5] = sum(m.m2[5] + a * d[2] * d[2]);
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
__device__ multipole<float> group_merge(const canopy::lane_group<G>& g, const multipole<float>* children, std::int32_t count,
                                        Load load) {
  static_assert(Batch >= 1 && Batch <= children_per_lane<G>, "Batch: 1 .. children per lane");
  constexpr int batch = Batch;
  multipole<float> acc = multipole_identity<float>();
  for (std::int32_t base = 0; base < count; base += batch * G) {
    multipole<float> got[batch];
#pragma unroll
    for (int j = 0; j < batch; ++j) {
      const std::int32_t c = base + g.rank + j * G;
      got[j] = c < count ? load(children + c) : multipole_identity<float>();
    }
#pragma unroll
    for (int j = 0; j < batch; ++j) acc = m2m_merge(acc, got[j]);  // identity merges are exact no-ops
  }
  // The lanes' partial moments, combined at once (every lane ends with the same).
  return group_combine<1>(g, acc);
}

// Word W (0..16) of a payload, in memory order: count, mass, com[3], m2[6], lo[3], hi[3]. W is a
// compile-time index, so the payload stays in registers.
template <int W>
__device__ __forceinline__ std::uint32_t multipole_word(const multipole<float>& m) {
  static_assert(W >= 0 && W < 17, "a multipole<float> has 17 words");
  if constexpr (W == 0) return m.count;
  else if constexpr (W == 1) return __float_as_uint(m.mass);
  else if constexpr (W < 5) return __float_as_uint(m.com[W - 2]);
  else if constexpr (W < 11) return __float_as_uint(m.m2[W - 5]);
  else if constexpr (W < 14) return __float_as_uint(m.lo[W - 11]);
  else return __float_as_uint(m.hi[W - 14]);
}

template <int Base, int G>
__device__ __forceinline__ std::uint32_t multipole_word_at(const multipole<float>& m, int k) {
  std::uint32_t v = 0;
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((v = (Base + I < 17 && k == Base + I) ? multipole_word<(Base + I < 17 ? Base + I : 0)>(m) : v), ...);
  }(std::make_integer_sequence<int, G>{});
  return v;
}

// Stores m at p with the G lanes of g, which all hold the same m (the results of group_p2m and
// group_merge are bitwise equal in every lane): lane r writes words r, r + G, ..., so one store
// instruction writes G consecutive words instead of one. Written by one lane, a payload is 17
// single-word stores, each its own L2 request: those requests, not DRAM, limit the bandwidth-bound
// passes (profiles in bench/RESULTS.md).
template <int G>
__device__ __forceinline__ void group_store(const canopy::lane_group<G>& g, multipole<float>* p, const multipole<float>& m) {
  static_assert(sizeof(multipole<float>) == 17 * sizeof(std::uint32_t), "multipole<float> is 17 packed words");
  auto* words = reinterpret_cast<std::uint32_t*>(p);
  [&]<int... B>(std::integer_sequence<int, B...>) {
    (([&] {
       const int k = B * G + g.rank;
       const std::uint32_t v = multipole_word_at<B * G, G>(m, k);
       if (k < 17) words[k] = v;
     }()),
     ...);
  }(std::make_integer_sequence<int, (17 + G - 1) / G>{});
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

// The multipole payload on lane groups: what the passes ran before they were generic over the
// payload, call for call (group_p2m_with, group_merge with loads through L2, group_combine,
// group_store), so their kernels are the same instructions.
template <>
struct group_payload<multipole_policy<float>> {
  using policy_type = multipole_policy<float>;
  using value_type = multipole<float>;

  __device__ static value_type empty(const policy_type&) { return multipole_identity<float>(); }

  template <int G, class Load>
  __device__ static value_type leaf(const policy_type&, const canopy::lane_group<G>& g, std::int32_t /*node*/,
                                    const float4* p4, std::int32_t n, Load load) {
    return group_p2m_with(g, p4, n, load);
  }

  template <int G, int Batch>
  __device__ static value_type children(const policy_type&, const canopy::lane_group<G>& g, std::int32_t /*node*/,
                                        const value_type* payload, std::int32_t first, std::int32_t count) {
    return group_merge<G, Batch>(g, payload + first, count, load_through_l2{});
  }

  template <int Stride, int G>
  __device__ static value_type gather(const policy_type&, const canopy::lane_group<G>& g, std::int32_t /*node*/,
                                      const value_type* /*payload*/, std::int32_t /*first*/, std::int32_t /*count*/,
                                      const value_type& mine) {
    return group_combine<Stride>(g, mine);
  }

  template <int G>
  __device__ static void store(const canopy::lane_group<G>& g, value_type* p, const value_type& v) {
    group_store(g, p, v);
  }
};

}  // namespace canopy::trees
