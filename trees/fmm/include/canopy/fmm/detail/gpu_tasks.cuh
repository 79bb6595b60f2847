// SPDX-License-Identifier: Apache-2.0
// The FMM's task bodies on the GPU: task_ops.hpp's serial bodies split over the G lanes of a
// lane group (canopy/lane_group.cuh; G = 32, or 1 in the scheduler modes where only warp masters
// work). The scheduled DAG (dag_ops) and the phase-by-phase baseline (phase_kernel) call the same
// bodies, so the comparison measures the schedule, not the kernels.
//
// How each kind is split (orders up to 6 run every kernel from registers, register_kernels.cuh;
// order 8 keeps kernels.hpp's per-lane arrays, in local memory):
//   up     lanes split the leaf's points (P2M) or the node's children (M2M); partial expansions
//          summed over the warp by recursive halving (warp_reduce_scatter)
//   m2l    lanes split the target's sources, a batch of G pairs at a time, each batch summed over
//          the warp by recursive halving into the lanes' running shares of the local
//   down   one lane runs the whole L2L (the parent's coefficients streamed, the child's in
//          registers); order 8: lanes split the output coefficients
//   l2p    lanes split the leaf's points (each holds the whole local expansion)
//   p2p    lanes split the part's points (task_dag: a leaf's points, or a part of them), copied
//          over the idle lanes, each copy taking a share of the source points
//
// Data that other tasks of the same run wrote (multipoles, locals, the fields p2p stored) is read
// with __ldcg: the scheduler's acquire orders it, but a lane that did not perform the acquire
// itself may otherwise hit a line its SM's L1 cached earlier (lane_group.cuh; ArborX #574,
// Axom #307). The bodies are __noinline__: the scheduler instantiates its persistent kernel for
// every mode, and inlined bodies would be compiled once per mode instead of once per order.
#pragma once

#if !defined(__CUDACC__)
#error "canopy/fmm/detail/gpu_tasks.cuh is device code: include it from .cu files only"
#endif

#include <canopy/fmm/detail/register_kernels.cuh>
#include <canopy/fmm/expansion.hpp>
#include <canopy/fmm/kernels.hpp>
#include <canopy/fmm/task_dag.hpp>
#include <canopy/fmm/task_ops.hpp>
#include <canopy/detail/kernel_common.cuh>
#include <canopy/lane_group.cuh>
#include <canopy/status.hpp>

#include <cstdint>
#include <type_traits>

namespace canopy::fmm::detail {

// A copy of an expansion another task of this run wrote, read past L1 (see the header comment).
template <class E>
__device__ __forceinline__ E load_written(const E& src) {
  E out;
#pragma unroll
  for (int i = 0; i < E::size; ++i) out.c[i] = __ldcg(&src.c[i]);
  return out;
}

// Sums `partial` over the group; lane r stores coefficients r, r + G, ... of the sum into *dst.
template <int G, class E>
__device__ __forceinline__ void sum_and_store(const lane_group<G>& g, const E& partial, E* dst) {
#pragma unroll
  for (int i = 0; i < E::size; ++i) {
    const float v = group_sum(g, partial.c[i]);
    if (i % G == g.rank) dst->c[i] = v;
  }
}

// Sums the lanes' partial expansions over the group and stores the sum into dst[0, N): recursive
// halving on a warp (lane r stores its share, coefficients K r ..), a butterfly per coefficient on a
// smaller group.
template <int G, int N>
__device__ __forceinline__ void sum_and_store_registers(const lane_group<G>& g, const float (&partial)[N], float* dst) {
  if constexpr (G == 32) {
    constexpr int K = warp_share<N>;
    float v[32 * K];
    warp_reduce_scatter<N>(g.rank, partial, v);
    static_for<K>([&](auto t) {
      const int i = g.rank * K + decltype(t)::value;
      if (i < N) dst[i] = v[decltype(t)::value];
    });
  } else {
    static_for<N>([&](auto ii) {
      constexpr int i = decltype(ii)::value;
      const float v = group_sum(g, partial[i]);
      if (i % G == g.rank) dst[i] = v;
    });
  }
}

// Staging in shared memory. A lane that streams an expansion's 16-byte chunks into its arithmetic
// (register_kernels.cuh) waits for each chunk in turn: at order 5, 14 dependent round trips to L2
// a pair, with too few registers left to have them in flight at once. So a warp first copies the
// expansions a batch needs (an M2L batch's 32 sources, an M2M's children, an L2L's parent) into a
// slab of its own in shared memory, every lane copying its share of the chunks at once (one round
// trip), and the arithmetic then reads the slab. A slab's rows are the expansions, an odd number of
// chunks apart, so that 8 lanes reading a chunk of 8 rows each hit other banks. Slabs serve the
// first staging_warps warps of a block (the default 128-thread blocks of the scheduler and of the
// phase kernels); the warps of larger blocks, and the kinds a run does not stage (gpu_tasks::staged:
// the DAG's m2l bodies by default, gpu_evaluate.hpp), read global memory as before, with the same
// bits.
inline constexpr int staging_warps = 4;
template <int P>
inline constexpr int expansion_chunks = static_cast<int>(sizeof(multipole_expansion<float, P>) / sizeof(float4));
template <int P>
inline constexpr int staging_stride = expansion_chunks<P> | 1;

// This warp's slab (32 rows of staging_stride<P> chunks), or null in a warp past staging_warps.
template <int P>
__device__ __forceinline__ float4* warp_staging_slab() {
  __shared__ float4 slabs[staging_warps][32 * staging_stride<P>];
  const unsigned warp = threadIdx.x / 32;
  return warp < staging_warps ? slabs[warp] : nullptr;
}

// This warp's tile of 32 source points for the P2P bodies, or null in a warp past staging_warps
// (those hand the points round by shuffles).
__device__ __forceinline__ float4* warp_p2p_tile() {
  __shared__ float4 tiles[staging_warps][32];
  const unsigned warp = threadIdx.x / 32;
  return warp < staging_warps ? tiles[warp] : nullptr;
}

// Copies `rows` (at most MaxRows) expansions into the slab, row r from row(r) (a const float4*;
// called in every lane with r below 32, whatever `rows`, so that it may shuffle), and converges
// the warp. Each lane copies its ceil(MaxRows C / 32) chunks at once with cp.async (global to shared
// memory past L1, as __ldcg reads, and through no register).
template <int P, int MaxRows, class Row>
__device__ __forceinline__ void stage_rows(float4* slab, int rows, int rank, const Row& row) {
  constexpr int C = expansion_chunks<P>, S = staging_stride<P>;
  constexpr int per_lane = (MaxRows * C + 31) / 32;
  static_assert(MaxRows <= 32);
  static_assert(sizeof(multipole_expansion<float, P>) % sizeof(float4) == 0 &&
                sizeof(local_expansion<float, P>) == sizeof(multipole_expansion<float, P>));
  static_for<per_lane>([&](auto qi) {
    const int idx = rank + 32 * decltype(qi)::value, r = idx / C;
    const float4* src = row(r < 32 ? r : 31) + (idx - r * C);
    if (r < rows) {
#if __CUDA_ARCH__ >= 800
      const auto dst = static_cast<unsigned>(__cvta_generic_to_shared(slab + r * S + (idx - r * C)));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
#else
      slab[r * S + (idx - r * C)] = __ldcg(src);
#endif
    }
  });
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
#endif
  __syncwarp();
}

// The body clocks' slots (gpu_tasks::clocks): per kind, the cycles its bodies took, how many ran
// and the longest; one set of every kind's is clock_slots words (the level graph's phase timing
// keeps one set a phase).
inline constexpr int clock_slots_per_kind = 3;
inline constexpr int clock_slots = 5 * clock_slots_per_kind;  // five kinds: task_kind

template <int P>
struct gpu_tasks {
  using multipole = multipole_expansion<float, P>;
  using local = local_expansion<float, P>;
  task_data<float, P> d;
  // Where the time goes (gpu_evaluator::set_task_clocks): per kind, the SM clock cycles its bodies
  // took (lane 0's clock64 around the body, the group converged after it), how many ran and the
  // longest one (clock_slots_per_kind slots a kind); null: not counted.
  unsigned long long* clocks = nullptr;
  // The DAG's timeline (gpu_evaluator::set_task_timeline): per task, the global timer (ns) when
  // its body began and ended, [2 t] and [2 t + 1]; null: not recorded.
  unsigned long long* timeline = nullptr;
  // Per task, 1 when the scheduler should run it before the other ready tasks (dag_ops::urgent,
  // gpu_evaluator::set_urgent_height); null: none is.
  const std::uint8_t* urgent = nullptr;
  // Which kinds stage their expansions in shared memory (bits of all_staged_kinds, task_dag.hpp;
  // gpu_evaluator::set_staged_kinds); the others stream them from global memory. Same bits either
  // way.
  unsigned staged = all_staged_kinds;

  // The warp's staging slab for a body of kind k, or null: not staged, or no slab for this warp.
  __device__ __forceinline__ float4* slab_for(task_kind k) const {
    return (staged >> static_cast<int>(k) & 1u) != 0 ? warp_staging_slab<P>() : nullptr;
  }

  __device__ __forceinline__ long long clock_start() const { return clocks != nullptr ? clock64() : 0; }
  template <int G>
  __device__ __forceinline__ void clock_stop(task_kind k, long long start, const lane_group<G>& g) const {
    if (clocks == nullptr) return;
    g.sync();
    if (g.rank == 0) {
      const auto cycles = static_cast<unsigned long long>(clock64() - start);
      unsigned long long* slot = clocks + clock_slots_per_kind * static_cast<int>(k);
      atomicAdd(slot, cycles);
      atomicAdd(slot + 1, 1ull);
      atomicMax(slot + 2, cycles);
    }
  }

  template <int G>
  __device__ __noinline__ void up(std::int32_t n, const lane_group<G>& g) const {
    if constexpr (P <= register_m2l_max_order) {
      constexpr int N = multipole::size;
      float m[N];
      static_for<N>([&](auto i) { m[decltype(i)::value] = 0.f; });
      const frame<float> f = d.frames[n];
      const std::int32_t children = d.child_count[n];
      if (children == 0) {
        const trees::point* pts = d.points + d.point_begin[n];
        for (std::int32_t j = g.rank; j < d.point_count[n]; j += G) p2m_point_registers<P>(pts[j], f, m);
      } else {
        const std::int32_t first = d.first_child[n];
        float4* slab = G == 32 && children <= 8 ? slab_for(task_kind::up) : nullptr;
        if (slab != nullptr) {
          const float4* child_chunks = reinterpret_cast<const float4*>(d.multipoles[first].c);
          stage_rows<P, 8>(slab, children, g.rank, [&](int r) { return child_chunks + r * expansion_chunks<P>; });
          if (g.rank < children)
            m2m_registers<P>(staged_chunks{slab + g.rank * staging_stride<P>}, d.frames[first + g.rank], f, m);
          __syncwarp();  // every lane is done with the slab before the warp's next body stages into it
        } else {
          for (std::int32_t c = first + g.rank; c < first + children; c += G)
            m2m_registers<P>(chunks_of(d.multipoles[c]), d.frames[c], f, m);
        }
      }
      sum_and_store_registers(g, m, d.multipoles[n].c);
      return;
    }
    multipole m;
    set_zero(m);
    const frame<float> f = d.frames[n];
    const std::int32_t children = d.child_count[n];
    if (children == 0) {
      const trees::point* pts = d.points + d.point_begin[n];
      for (std::int32_t j = g.rank; j < d.point_count[n]; j += G) p2m(pts + j, 1, f, m);
    } else {
      const std::int32_t first = d.first_child[n];
      for (std::int32_t c = first + g.rank; c < first + children; c += G) m2m(load_written(d.multipoles[c]), d.frames[c], f, m);
    }
    sum_and_store(g, m, d.multipoles + n);
  }

  // The target's sources in batches of G, a source per lane, each pair's contribution computed
  // from registers (register_kernels.cuh) and summed over the group at once, so that a lane holds
  // the derivative tensor and one pair's contribution, never a third expansion. Each lane keeps a
  // share of the local's running sums: on a warp, coefficients K r .. K r + K - 1 (warp_share, the
  // batch summed by recursive halving, 32 K - K shuffles); on a smaller group, coefficients
  // r, r + G, ... (a butterfly per coefficient). The sum's order is fixed by the list (batch by
  // batch), whatever the schedule.
  // Above register_m2l_max_order the tensors do not fit in registers: kernels.hpp's m2l per lane.
  template <int G>
  __device__ __noinline__ void m2l_into(std::int32_t t, const lane_group<G>& g) const {
    const frame<float> tf = d.frames[t];
    const std::int32_t begin = d.m2l_offset[t], end = d.m2l_offset[t + 1];
    if constexpr (P <= register_m2l_max_order) {
      constexpr int N = local::size;
      constexpr int share = G == 32 ? warp_share<N> : (N + G - 1) / G;
      // The coefficient that share slot j of this lane sums.
      const auto coefficient = [&](int j) { return G == 32 ? g.rank * share + j : j * G + g.rank; };
      float sum[share];
      static_for<share>([&](auto i) { sum[decltype(i)::value] = 0.f; });
      // A warp stages each batch's sources (stage_rows) and loads the next batch's ids meanwhile.
      float4* slab = G == 32 ? slab_for(task_kind::m2l) : nullptr;
      std::int32_t next = begin + g.rank < end ? d.m2l_source[begin + g.rank] : 0;
      for (std::int32_t base = begin; base < end; base += G) {
        const std::int32_t k = base + g.rank;
        float pair[N];
        if (slab != nullptr) {
          const std::int32_t s = next;
          frame<float> sf{};
          if (k < end) sf = d.frames[s];
          if (k + G < end) next = d.m2l_source[k + G];
          const float4* multipoles = reinterpret_cast<const float4*>(d.multipoles);
          stage_rows<P, 32>(slab, end - base, g.rank,
                            [&](int r) { return multipoles + std::int64_t{__shfl_sync(0xffffffffu, s, r)} * expansion_chunks<P>; });
          if (k < end) m2l_pair_registers<P>(staged_chunks{slab + g.rank * staging_stride<P>}, sf, tf, d.eps2, pair);
          else static_for<N>([&](auto i) { pair[decltype(i)::value] = 0.f; });
        } else if (k < end) {
          const std::int32_t s = d.m2l_source[k];
          m2l_pair_registers<P>(chunks_of(d.multipoles[s]), d.frames[s], tf, d.eps2, pair);
        } else {
          static_for<N>([&](auto i) { pair[decltype(i)::value] = 0.f; });
        }
        if constexpr (G == 32) {
          float v[32 * share];
          warp_reduce_scatter<N>(g.rank, pair, v);
          static_for<share>([&](auto i) { sum[decltype(i)::value] += v[decltype(i)::value]; });
          __syncwarp();  // every lane is done with the slab before the next batch overwrites it
        } else {
          static_for<N>([&](auto ii) {
            constexpr int i = decltype(ii)::value;
            const float v = group_sum(g, pair[i]);
            if (g.rank == i % G) sum[i / G] += v;
          });
        }
      }
      static_for<share>([&](auto ji) {
        constexpr int j = decltype(ji)::value;
        const int c = coefficient(j);
        if (c < N) d.locals[t].c[c] = sum[j];
      });
    } else {
      local l;
      set_zero(l);
      for (std::int32_t k = begin + g.rank; k < end; k += G) {
        const std::int32_t s = d.m2l_source[k];
        m2l(load_written(d.multipoles[s]), d.frames[s], tf, d.eps2, l);
      }
      sum_and_store(g, l, d.locals + t);
    }
  }

  // kernels.hpp's l2l into the child:
  //   Ft^C_j = own_j + (s_C / s_B)^(|j|+1) sum_{|m| <= P-|j|} Ft^B_{j+m} S_m(t / s_B)
  // with own_j the node's M2L result (0 without one): at orders up to 6 by lane 0 alone, from
  // registers (l2l_registers); at 8 each lane computing the coefficients j = rank (mod G). Each
  // coefficient is read and written by one lane, so reading locals[n] and storing over it needs no
  // synchronisation.
  template <int G>
  __device__ __noinline__ void down(std::int32_t n, const lane_group<G>& g) const {
    const std::int32_t p = d.parent[n];
    const bool own = d.has_m2l(n), inherit = p >= 0 && d.has_local[p] != 0;
    const frame<float> cf = d.frames[n];
    float* out = d.locals[n].c;
    if (!inherit) {
      for (int j = g.rank; j < local::size; j += G) out[j] = own ? __ldcg(out + j) : 0.f;
      return;
    }
    if constexpr (P <= register_m2l_max_order) {
      constexpr int N = local::size;
      // A warp stages the parent's local (row 0) and the node's own (row 1) at once; lane 0 sums.
      float4* slab = G == 32 ? slab_for(task_kind::down) : nullptr;
      if (slab != nullptr) {
        const float4* parent_chunks = reinterpret_cast<const float4*>(d.locals[p].c);
        const float4* own_chunks = reinterpret_cast<const float4*>(out);
        stage_rows<P, 2>(slab, own ? 2 : 1, g.rank, [&](int r) { return r == 0 ? parent_chunks : own_chunks; });
        if (g.rank == 0) {
          float acc[N];
          l2l_registers<P>(staged_chunks{slab}, d.frames[p], cf, acc);
          const float* own_staged = reinterpret_cast<const float*>(slab + staging_stride<P>);
          static_for<N>([&](auto ji) {
            constexpr int j = decltype(ji)::value;
            out[j] = (own ? own_staged[j] : 0.f) + acc[j];
          });
        }
        __syncwarp();  // lane 0 is done with the slab before the warp's next body stages into it
        return;
      }
      if (g.rank != 0) return;
      float acc[N];
      l2l_registers<P>(chunks_of(d.locals[p]), d.frames[p], cf, acc);
      static_for<N>([&](auto ji) {
        constexpr int j = decltype(ji)::value;
        out[j] = (own ? __ldcg(out + j) : 0.f) + acc[j];
      });
      return;
    }
    const float* parent = d.locals[p].c;
    float s[coefficient_count(P)];
    float power[P + 1];  // (s_C / s_B)^(|j|+1)
    fmm::detail::powers_from<float, P>(fmm::detail::shift_monomials<float, P>(d.frames[p], cf, s), power);
    // l2l's sums, the output coefficients split over the lanes.
    fmm::detail::for_each_multi_index<P>([&](int j, int jx, int jy, int jz, int jo) {
      if (j % G != g.rank) return;
      const float sum = fmm::detail::shifted_contraction<float, P>([&](int i) { return __ldcg(parent + i); }, s, jx, jy, jz, jo);
      out[j] = (own ? __ldcg(out + j) : 0.f) + power[jo] * sum;
    });
  }

  template <int G>
  __device__ __noinline__ void l2p_leaf(std::int32_t leaf, const lane_group<G>& g) const {
    const std::int32_t begin = d.point_begin[leaf], end = begin + d.point_count[leaf];
    if (begin + g.rank >= end) return;
    const frame<float> f = d.frames[leaf];
    if constexpr (P <= register_m2l_max_order) {
      float l[local::size];
      load_registers(d.locals[leaf], l);
      for (std::int32_t j = begin + g.rank; j < end; j += G) {
        const trees::point q = d.points[j];
        const field<float> far = l2p_registers<P>(l, f, q.x, q.y, q.z);
        field<float>* out = d.fields + j;
        out->ax = __ldcg(&out->ax) + far.ax;
        out->ay = __ldcg(&out->ay) + far.ay;
        out->az = __ldcg(&out->az) + far.az;
        out->phi = __ldcg(&out->phi) + far.phi;
      }
      return;
    }
    const local l = load_written(d.locals[leaf]);
    for (std::int32_t j = begin + g.rank; j < end; j += G) {
      const trees::point q = d.points[j];
      const field<float> far = l2p(l, f, q.x, q.y, q.z);
      field<float>* out = d.fields + j;
      out->ax = __ldcg(&out->ax) + far.ax;
      out->ay = __ldcg(&out->ay) + far.ay;
      out->az = __ldcg(&out->az) + far.az;
      out->phi = __ldcg(&out->phi) + far.phi;
    }
  }

  // p2p task p2p_begin + i, over its part of a leaf's points (task_dag.hpp), G points a round.
  // A round of n points on G lanes: c = G / n copies of its points (c = 1 from n > G / 2),
  // copy q taking every c-th source point; the copies' partial fields are then added in copy
  // order over shuffles. Leaves hold about 9 points on average at 32 a leaf (Plummer), so a lane
  // per point left more than two thirds of the warp idle.
  // The source points come in tiles of G, as in the classic GPU N-body kernel: the list's leaves
  // are read G at a time (a leaf a lane: its range), their points counted by a warp scan, and
  // every lane loads one point of the tile (a binary search over the scan finds its leaf), which
  // a warp then reads from a tile in shared memory (one 16-byte read a source; a smaller group
  // hands the points round by four shuffles). Read leaf by leaf, as before, every source leaf cost
  // three dependent loads and its few points a short loop with little in flight: a P2P task of a
  // few hundred source leaves waited on memory most of its time, and one heavy leaf could hold
  // its warp for a whole phase (task_dag's p2p parts cut such leaves). The target leaf itself (the
  // one source whose points include the lane's own, which weighs nothing) is run last, point by
  // point.
  template <int G>
  __device__ __noinline__ void p2p_part(std::int32_t i, const lane_group<G>& g) const {
    std::int32_t leaf = 0, begin = 0, end = 0;
    d.p2p_part(i, leaf, begin, end);
    const std::int32_t leaf_begin = d.point_begin[leaf], leaf_end = leaf_begin + d.point_count[leaf];
    const std::int32_t first = d.p2p_offset[leaf], last = d.p2p_offset[leaf + 1];
    const float eps2 = d.eps2;
    float4* const tile_smem = G == 32 ? warp_p2p_tile() : nullptr;
    for (std::int32_t base = begin; base < end; base += G) {
      const int n = static_cast<int>(end - base < G ? end - base : G);
      const int copies = G / n, copy = g.rank / n, slot = g.rank - copy * n;
      const int steps = (G + copies - 1) / copies;  // a copy's share of a full tile
      const std::int32_t j = base + slot;
      const bool active = copy < copies;
      float ax = 0.f, ay = 0.f, az = 0.f, phi = 0.f;
      const trees::point q = d.points[active ? j : base];
      const auto add = [&](const trees::point& p, bool use) {
        const float dx = p.x - q.x, dy = p.y - q.y, dz = p.z - q.z;
        const float inv_r = use ? rsqrtf(dx * dx + dy * dy + dz * dz + eps2) : 0.f;
        const float m_inv_r = p.m * inv_r;
        const float w = m_inv_r * inv_r * inv_r;
        ax += w * dx;
        ay += w * dy;
        az += w * dz;
        phi -= m_inv_r;
      };
      bool self = false;
      for (std::int32_t batch = first; batch < last; batch += G) {
        const int m = static_cast<int>(last - batch < G ? last - batch : G);
        std::int32_t lane_begin = 0, lane_count = 0;  // this lane's source leaf of the batch
        if (g.rank < m) {
          const std::int32_t s = d.p2p_source[batch + g.rank];
          if (s == leaf) self = true;
          else {
            lane_begin = d.point_begin[s];
            lane_count = d.point_count[s];
          }
        }
        self = g.any(self);
        const std::int32_t incl = group_inclusive_sum(g, lane_count);  // the batch's points up to this lane's leaf
        const std::int32_t total = g.from_lane(incl, G - 1);
        for (std::int32_t tile = 0; tile < total; tile += G) {
          // This lane's point of the tile: flattened index u, in the leaf r with incl[r - 1] <= u < incl[r].
          const std::int32_t u = tile + g.rank;
          int r = 0;
          for (int step = G / 2; step > 0; step /= 2)
            if (g.from_lane(incl, r + step - 1) <= u) r += step;
          const std::int32_t source_begin = g.from_lane(lane_begin, r), source_end_flat = g.from_lane(incl, r),
                             source_count = g.from_lane(lane_count, r);
          trees::point mine{0.f, 0.f, 0.f, 0.f};
          if (u < total) mine = d.points[source_begin + (u - (source_end_flat - source_count))];
          const int in_tile = static_cast<int>(total - tile < G ? total - tile : G);
          if (tile_smem != nullptr) {
            // A warp: the tile goes through shared memory, one 16-byte read a source where the
            // shuffles took four, and each lane runs only the steps whose source is in the tile
            // (the same sources in the same order as the shuffles: the same sums).
            tile_smem[g.rank] = make_float4(mine.x, mine.y, mine.z, mine.m);
            __syncwarp();
            const int first_from = active ? copy : 0;
            const int count = active && copy < in_tile ? (in_tile - copy + copies - 1) / copies : 0;
            const float4* from = tile_smem + first_from;
#pragma unroll 4
            for (int v = 0; v < count; ++v) {
              const float4 p = from[v * copies];
              add(trees::point{p.x, p.y, p.z, p.w}, true);  // a constant choice: none is made
            }
            __syncwarp();  // every lane is done with the tile before the next overwrites it
            continue;
          }
#pragma unroll 4
          for (int v = 0; v < steps; ++v) {
            const int from = copy + v * copies;
            const int lane = from < G ? from : G - 1;
            const trees::point p{g.from_lane(mine.x, lane), g.from_lane(mine.y, lane), g.from_lane(mine.z, lane),
                                 g.from_lane(mine.m, lane)};
            add(p, active && from < in_tile);
          }
        }
      }
      if (self && active)
        for (std::int32_t k = leaf_begin + copy; k < leaf_end; k += copies) add(d.points[k], k != j);
      // Copy 0's lanes add the other copies' partials in copy order. The shuffles read ax .. phi,
      // which no lane changes here: summing into them in place would hand the next round a lane
      // that already added an earlier copy, counting copy c >= 1 2^(copies-1-c) times (a leaf of
      // one point: copy 1 2^30 times). Every lane takes part (copies is the group's).
      float sx = ax, sy = ay, sz = az, sphi = phi;
      for (int c = 1; c < copies; ++c) {
        const int from = c * n + slot;
        sx += g.from_lane(ax, from);
        sy += g.from_lane(ay, from);
        sz += g.from_lane(az, from);
        sphi += g.from_lane(phi, from);
      }
      if (copy == 0) d.fields[j] = field<float>{sx, sy, sz, sphi};
    }
  }

  template <task_kind K, int G>
  __device__ __forceinline__ void run(std::int32_t n, const lane_group<G>& g) const {
    if constexpr (K == task_kind::up) up(n, g);
    else if constexpr (K == task_kind::m2l) m2l_into(n, g);
    else if constexpr (K == task_kind::down) down(n, g);
    else if constexpr (K == task_kind::l2p) l2p_leaf(n, g);
    else p2p_part(n, g);  // n: the p2p task's index, not a node
  }
};

// The scheduler's Ops for the whole DAG: a warp per task, the kind read off the id's range.
// One task per group and batch: the tasks are long (a P = 8 M2L list is tens of microseconds of
// one warp), so a group that took four would hold work that idle warps could run.
//
// The register budget is the level graph's: its phase kernels have no cap, and ptxas gives the
// order-6 M2L and up kernels 127 and 130 registers (220 and 254 at order 8). At the scheduler's
// default cap of 64 the same bodies spilled (228 bytes of spill stores a call in m2l_into at
// order 6, 748 in up) and twice the threads kept their expansions in local memory at once: the two
// schedules ran different machine code, not only different orders. The register M2L needs 80, 128
// and 168 registers at orders 4, 5 and 6 (ptxas, the M2L phase kernel): 168 still lets three
// 128-thread blocks share an SM.
template <int P>
struct dag_ops {
  static constexpr int group_size = 32;
  static constexpr int tasks_per_group = 1;
  static constexpr int max_registers = P >= 8 ? 224 : P >= 6 ? 168 : 128;
  gpu_tasks<P> tasks;

  // The scheduler's priority hook (canopy/detail/ops_traits.cuh): the critical path's tasks.
  __device__ bool urgent(task_id t) const { return tasks.urgent != nullptr && tasks.urgent[t] != 0; }

  template <int G>
  __device__ void operator()(task_id t, const lane_group<G>& g) const {
    const std::int32_t n = tasks.d.node_of(t);
    const task_kind kind = tasks.d.ranges.kind_of(t);
    // The timeline's clock is the device's global timer: one for every SM.
    if (tasks.timeline != nullptr && g.rank == 0) tasks.timeline[2 * static_cast<std::int64_t>(t)] = canopy::detail::global_timer_ns();
    const long long start = tasks.clock_start();
    switch (kind) {
      case task_kind::up: tasks.up(n, g); break;
      case task_kind::m2l: tasks.m2l_into(n, g); break;
      case task_kind::down: tasks.down(n, g); break;
      case task_kind::l2p: tasks.l2p_leaf(n, g); break;
      case task_kind::p2p: tasks.p2p_part(t - tasks.d.ranges.p2p_begin, g); break;
    }
    tasks.clock_stop(kind, start, g);
    if (tasks.timeline != nullptr) {
      g.sync();
      if (g.rank == 0) tasks.timeline[2 * static_cast<std::int64_t>(t) + 1] = canopy::detail::global_timer_ns();
    }
  }
};
static_assert(std::is_trivially_copyable_v<dag_ops<4>>);

// The phase kernels' register budget. Left alone, ptxas gives the staged M2L of order 5 152
// registers (three 128-thread blocks an SM); capped at 128 (four blocks, no spill) its phase took
// 2.70 ms at 1M Plummer points against 2.82 (H200). At order 4 the cap cost 8% (1.88 against 1.74
// ms), so only order 5 has it (bench/results/h200/fmm_staging/phase_cap/).
template <int P, task_kind K>
inline constexpr int phase_min_blocks = K == task_kind::m2l && P == 5 ? 4 : 1;

// The baseline's kernel: one kind over a list of nodes, a warp per node (blocks of 128 threads);
// P2P over the p2p tasks' indices (nodes unused).
template <int P, task_kind K>
__global__ void __launch_bounds__(128, phase_min_blocks<P, K>) phase_kernel(gpu_tasks<P> tasks, const std::int32_t* nodes,
                                                                            std::int32_t count) {
  const std::int64_t warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (warp >= count) return;  // the whole warp leaves together: no shuffle below misses a lane
  const lane_group<32> g = lane_group<32>::here();
  const long long start = tasks.clock_start();
  tasks.template run<K>(K == task_kind::p2p ? static_cast<std::int32_t>(warp) : nodes[warp], g);
  tasks.clock_stop(K, start, g);
}

}  // namespace canopy::fmm::detail
