// SPDX-License-Identifier: Apache-2.0
// kernels.hpp's kernels for one lane with every array in registers (M2L, and P2M, M2M, L2L, L2P),
// and the warp's sum of an expansion: the loops over multi-indices unrolled at compile time
// (static_for), so that each coefficient is a register and not an element of a per-thread array in
// local memory. The generic kernels index their arrays by
// loop variables; under nvcc the order-6 M2L kept a 1.3 KB stack per thread whose traffic, not the
// arithmetic, set its speed (about 50x under the SM's issue rate).
//
// Same formulas, same scaling and, per output coefficient, the same order of the sum as
// kernels.hpp (the terms in the canonical order of n), so results differ from the CPU's only by
// rounding (FMA contraction). Live registers: the derivative tensor and the pair's contribution,
// 2 x coefficient_count(P) floats (168 at order 6, 112 at 5, 70 at 4); at order 8 (330) they
// would not fit, and gpu_tasks.cuh keeps the generic kernel there.
#pragma once

#if !defined(__CUDACC__)
#error "canopy/fmm/detail/register_kernels.cuh is device code: include it from .cu files only"
#endif

#include <canopy/fmm/expansion.hpp>
#include <canopy/trees/point.hpp>

#include <cuda_runtime.h>

#include <type_traits>
#include <utility>

namespace canopy::fmm::detail {

// The highest order whose M2L runs from registers (the two tensors fit the 255-register budget);
// the other kernels' register versions use the same bound.
inline constexpr int register_m2l_max_order = 6;

template <class F, int... I>
__device__ __forceinline__ void static_for_each(F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
// f(std::integral_constant<int, i>{}) for i = 0 .. N-1: every index a constant expression.
template <int N, class F>
__device__ __forceinline__ void static_for(F&& f) {
  static_for_each(f, std::make_integer_sequence<int, N>{});
}

// The multi-index of linear index i (multi_index's inverse) and its order.
struct multi_index_parts {
  int x, y, z, order;
};
CANOPY_HD constexpr multi_index_parts multi_of(int i) {
  int o = 0;
  while (coefficient_count(o) <= i) ++o;
  const int r = i - coefficient_count(o - 1);  // position within order o: a (a + 1) / 2 + nz, a = ny + nz
  int a = 0;
  while ((a + 1) * (a + 2) / 2 <= r) ++a;
  const int z = r - a * (a + 1) / 2;
  return {o - a, a - z, z, o};
}
// The linear index of n + k.
CANOPY_HD constexpr int sum_index(int n, int k) {
  const multi_index_parts a = multi_of(n), b = multi_of(k);
  return multi_index(a.x + b.x, a.y + b.y, a.z + b.z);
}
static_assert(multi_of(multi_index(2, 3, 1)).y == 3 && multi_of(multi_index(0, 0, 6)).z == 6 && sum_index(1, 3) == multi_index(1, 0, 1));

// expansion.hpp's derivative_tensor<float, Q> (the in-place McMurchie-Davidson recurrence, stage by
// stage, orders from the highest down) with every index a constant.
template <int Q>
__device__ __forceinline__ void derivative_tensor_registers(float rx, float ry, float rz, float e2,
                                                            float (&d)[coefficient_count(Q)]) {
  const float r2 = rx * rx + ry * ry + rz * rz + e2;
  const float inv_r2 = 1.f / r2;
  float g[Q + 1];
  g[0] = 1.f / sqrtf(r2);
  static_for<Q>([&](auto i) {
    constexpr int m = decltype(i)::value + 1;
    g[m] = -float(2 * m - 1) * inv_r2 * g[m - 1];
  });
  static_for<Q + 1>([&](auto stage) {
    constexpr int m = Q - decltype(stage)::value;
    static_for<Q - m>([&](auto oi) {
      constexpr int o = Q - m - decltype(oi)::value;
      static_for<(o + 1) * (o + 2) / 2>([&](auto e) {
        constexpr int idx = coefficient_count(o - 1) + decltype(e)::value;
        constexpr multi_index_parts n = multi_of(idx);
        if constexpr (n.x > 0) {
          float v = rx * d[multi_index(n.x - 1, n.y, n.z)];
          if constexpr (n.x > 1) v += float(n.x - 1) * d[multi_index(n.x - 2, n.y, n.z)];
          d[idx] = v;
        } else if constexpr (n.y > 0) {
          float v = ry * d[multi_index(n.x, n.y - 1, n.z)];
          if constexpr (n.y > 1) v += float(n.y - 1) * d[multi_index(n.x, n.y - 2, n.z)];
          d[idx] = v;
        } else {
          float v = rz * d[multi_index(n.x, n.y, n.z - 1)];
          if constexpr (n.z > 1) v += float(n.z - 1) * d[multi_index(n.x, n.y, n.z - 2)];
          d[idx] = v;
        }
      });
    });
    d[0] = g[m];
  });
}

// Where a kernel reads an expansion's 16-byte chunks: from global memory that another task of the
// run wrote (past L1), or from a copy its warp staged in shared memory (gpu_tasks.cuh's
// stage_rows). The arithmetic is the same either way, so are the bits.
struct written_chunks {
  const float4* p;
  __device__ __forceinline__ float4 operator()(int c) const { return __ldcg(p + c); }
};
struct staged_chunks {
  const float4* p;
  __device__ __forceinline__ float4 operator()(int c) const { return p[c]; }
};
template <class E>
__device__ __forceinline__ written_chunks chunks_of(const E& e) {
  return {reinterpret_cast<const float4*>(e.c)};
}

// Coefficient i of an expansion read as 16-byte chunks (expansion.hpp aligns float expansions):
// chunk holds coefficients 4 (i / 4) .. 4 (i / 4) + 3, loaded when i is a multiple of 4.
template <int I>
__device__ __forceinline__ float chunk_part(const float4& chunk) {
  if constexpr (I % 4 == 0) return chunk.x;
  else if constexpr (I % 4 == 1) return chunk.y;
  else if constexpr (I % 4 == 2) return chunk.z;
  else return chunk.w;
}

// One M2L pair's contribution, kernels.hpp's m2l into a zeroed local:
//   t_k = beta^(|k|+1) sum_{|n| <= P-|k|} (-alpha)^|n| Mt_n Dh_{n+k}
// The source's coefficients are streamed (its 16-byte chunks from `source`: written_chunks or
// staged_chunks), each used for all its k at once, so only Dh and t stay live.
template <int P, class Chunks>
__device__ __forceinline__ void m2l_pair_registers(const Chunks& source, const frame<float>& sf,
                                                   const frame<float>& tf, float eps2, float (&t)[coefficient_count(P)]) {
  constexpr int N = coefficient_count(P);
  const float rx = tf.center[0] - sf.center[0], ry = tf.center[1] - sf.center[1], rz = tf.center[2] - sf.center[2];
  const float sigma = sqrtf(rx * rx + ry * ry + rz * rz + eps2);
  const float inv_sigma = 1.f / sigma;
  float dt[N];
  derivative_tensor_registers<P>(rx * inv_sigma, ry * inv_sigma, rz * inv_sigma, eps2 * inv_sigma * inv_sigma, dt);
  float alpha_power[P + 1];  // (-alpha)^o
  alpha_power[0] = 1.f;
  const float alpha = -sf.scale * inv_sigma;
  static_for<P>([&](auto i) { alpha_power[decltype(i)::value + 1] = alpha_power[decltype(i)::value] * alpha; });
  static_for<N>([&](auto i) { t[decltype(i)::value] = 0.f; });
  float4 chunk;
  static_for<N>([&](auto ni) {
    constexpr int n = decltype(ni)::value;
    constexpr int on = multi_of(n).order;
    if constexpr (n % 4 == 0) chunk = source(n / 4);
    const float w = chunk_part<n>(chunk) * alpha_power[on];
    static_for<coefficient_count(P - on)>([&](auto ki) {
      constexpr int k = decltype(ki)::value;
      constexpr int nk = sum_index(n, k);
      t[k] += w * dt[nk];
    });
  });
  float beta_power[P + 1];  // beta^(o+1)
  const float beta = tf.scale * inv_sigma;
  beta_power[0] = beta;
  static_for<P>([&](auto i) { beta_power[decltype(i)::value + 1] = beta_power[decltype(i)::value] * beta; });
  static_for<N>([&](auto ki) {
    constexpr int k = decltype(ki)::value;
    constexpr int ok = multi_of(k).order;
    t[k] *= beta_power[ok];
  });
}

// s[n] = S_n(v) = v^n / n!, |n| <= Q: expansion.hpp's scaled_monomials with every index a constant.
template <int Q>
__device__ __forceinline__ void scaled_monomials_registers(float vx, float vy, float vz, float (&s)[coefficient_count(Q)]) {
  s[0] = 1.f;
  static_for<coefficient_count(Q) - 1>([&](auto i) {
    constexpr int idx = decltype(i)::value + 1;
    constexpr multi_index_parts n = multi_of(idx);
    if constexpr (n.x > 0) s[idx] = s[multi_index(n.x - 1, n.y, n.z)] * vx / float(n.x);
    else if constexpr (n.y > 0) s[idx] = s[multi_index(n.x, n.y - 1, n.z)] * vy / float(n.y);
    else s[idx] = s[multi_index(n.x, n.y, n.z - 1)] * vz / float(n.z);
  });
}

// The coefficients of an expansion another task of the run wrote, in registers (16-byte loads
// past L1).
template <int N, class E>
__device__ __forceinline__ void load_registers(const E& e, float (&c)[N]) {
  static_assert(E::size == N);
  const float4* chunks = reinterpret_cast<const float4*>(e.c);
  float4 chunk;
  static_for<N>([&](auto ii) {
    constexpr int i = decltype(ii)::value;
    if constexpr (i % 4 == 0) chunk = __ldcg(chunks + i / 4);
    c[i] = chunk_part<i>(chunk);
  });
}

// P2M of one point: kernels.hpp's p2m, adding into m.
template <int P>
__device__ __forceinline__ void p2m_point_registers(const trees::point& q, const frame<float>& f,
                                                    float (&m)[coefficient_count(P)]) {
  constexpr int N = coefficient_count(P);
  const float inv_s = 1.f / f.scale;
  float s[N];
  scaled_monomials_registers<P>((q.x - f.center[0]) * inv_s, (q.y - f.center[1]) * inv_s, (q.z - f.center[2]) * inv_s, s);
  const float mass = q.m;
  static_for<N>([&](auto i) { m[decltype(i)::value] += mass * s[decltype(i)::value]; });
}

// M2M of one child: kernels.hpp's m2m, adding into m,
//   Mt^A_{k+j} += Mt^C_k rho^|k| S_j(d / s_A)  for |k + j| <= P,
// the child's coefficients streamed from `child` (written_chunks or staged_chunks; each used for all
// its j at once), so that only S and m stay live.
template <int P, class Chunks>
__device__ __forceinline__ void m2m_registers(const Chunks& child, const frame<float>& cf,
                                              const frame<float>& pf, float (&m)[coefficient_count(P)]) {
  constexpr int N = coefficient_count(P);
  const float inv_s = 1.f / pf.scale;
  float s[N];
  scaled_monomials_registers<P>((cf.center[0] - pf.center[0]) * inv_s, (cf.center[1] - pf.center[1]) * inv_s,
                                (cf.center[2] - pf.center[2]) * inv_s, s);
  const float rho = cf.scale * inv_s;
  float rho_power[P + 1];
  rho_power[0] = 1.f;
  static_for<P>([&](auto i) { rho_power[decltype(i)::value + 1] = rho_power[decltype(i)::value] * rho; });
  float4 chunk;
  static_for<N>([&](auto ki) {
    constexpr int k = decltype(ki)::value;
    constexpr int ok = multi_of(k).order;
    if constexpr (k % 4 == 0) chunk = child(k / 4);
    const float w = chunk_part<k>(chunk) * rho_power[ok];
    static_for<coefficient_count(P - ok)>([&](auto ji) {
      constexpr int j = decltype(ji)::value;
      m[sum_index(k, j)] += w * s[j];
    });
  });
}

// L2L into one child: kernels.hpp's l2l with the sums over m ordered by the parent's coefficient,
//   acc_j = sum_{j <= i} Ft^B_i S_{i-j}(t / s_B),  out_j = own_j + (s_C / s_B)^(|j|+1) acc_j,
// the parent's coefficients streamed from `parent` (written_chunks or staged_chunks), so that only S
// and acc stay live.
template <int P, class Chunks>
__device__ __forceinline__ void l2l_registers(const Chunks& parent, const frame<float>& pf,
                                              const frame<float>& cf, float (&acc)[coefficient_count(P)]) {
  constexpr int N = coefficient_count(P);
  const float inv_s = 1.f / pf.scale;
  float s[N];
  scaled_monomials_registers<P>((cf.center[0] - pf.center[0]) * inv_s, (cf.center[1] - pf.center[1]) * inv_s,
                                (cf.center[2] - pf.center[2]) * inv_s, s);
  static_for<N>([&](auto j) { acc[decltype(j)::value] = 0.f; });
  float4 chunk;
  static_for<N>([&](auto ii) {
    constexpr int i = decltype(ii)::value;
    constexpr multi_index_parts ip = multi_of(i);
    if constexpr (i % 4 == 0) chunk = parent(i / 4);
    const float f = chunk_part<i>(chunk);
    static_for<ip.x + 1>([&](auto ax) {
      static_for<ip.y + 1>([&](auto ay) {
        static_for<ip.z + 1>([&](auto az) {
          constexpr int jx = decltype(ax)::value, jy = decltype(ay)::value, jz = decltype(az)::value;
          acc[multi_index(jx, jy, jz)] += f * s[multi_index(ip.x - jx, ip.y - jy, ip.z - jz)];
        });
      });
    });
  });
  const float ratio = cf.scale * inv_s;
  float power[P + 1];  // ratio^(o+1)
  power[0] = ratio;
  static_for<P>([&](auto i) { power[decltype(i)::value + 1] = power[decltype(i)::value] * ratio; });
  static_for<N>([&](auto ji) {
    constexpr int j = decltype(ji)::value;
    acc[j] *= power[multi_of(j).order];
  });
}

// L2P at one point from a local expansion held in registers: kernels.hpp's l2p.
template <int P>
__device__ __forceinline__ field<float> l2p_registers(const float (&l)[coefficient_count(P)], const frame<float>& f, float x,
                                                      float y, float z) {
  constexpr int N = coefficient_count(P);
  const float inv_s = 1.f / f.scale;
  float s[N];
  scaled_monomials_registers<P>((x - f.center[0]) * inv_s, (y - f.center[1]) * inv_s, (z - f.center[2]) * inv_s, s);
  float psi = 0.f, gx = 0.f, gy = 0.f, gz = 0.f;
  static_for<N>([&](auto ki) {
    constexpr int k = decltype(ki)::value;
    constexpr multi_index_parts kp = multi_of(k);
    psi += l[k] * s[k];
    if constexpr (kp.order < P) {
      gx += l[multi_index(kp.x + 1, kp.y, kp.z)] * s[k];
      gy += l[multi_index(kp.x, kp.y + 1, kp.z)] * s[k];
      gz += l[multi_index(kp.x, kp.y, kp.z + 1)] * s[k];
    }
  });
  const float inv_s2 = inv_s * inv_s;
  return field<float>{gx * inv_s2, gy * inv_s2, gz * inv_s2, -psi * inv_s};
}

// The sum of v over the 32 lanes of a warp, scattered: afterwards lane r holds, in v[0, K), the
// sums of coefficients K r .. K r + K - 1 (K = warp_share<N>, the N coefficients padded to 32 K).
// Recursive halving: each round a lane keeps half of its coefficients, sends the other half to
// the lane `mask` away and adds what that lane sent. 32 K - K shuffles against a butterfly's 5 N
// (62 against 280 at order 5), and the same order of additions in every run.
template <int N>
inline constexpr int warp_share = N <= 32 ? 1 : N <= 64 ? 2 : N <= 128 ? 4 : 8;

template <int N>
__device__ __forceinline__ void warp_reduce_scatter(int lane, const float (&in)[N], float (&v)[32 * warp_share<N>]) {
  constexpr int M = 32 * warp_share<N>;
  static_for<M>([&](auto i) {
    constexpr int k = decltype(i)::value;
    if constexpr (k < N) v[k] = in[k];
    else v[k] = 0.f;
  });
  static_for<5>([&](auto round) {
    constexpr int r = decltype(round)::value;
    constexpr int half = M >> (r + 1), mask = 16 >> r;
    const bool upper = (lane & mask) != 0;
    static_for<half>([&](auto ii) {
      constexpr int i = decltype(ii)::value;
      const float send = upper ? v[i] : v[i + half];
      const float keep = upper ? v[i + half] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, mask);
    });
  });
}

}  // namespace canopy::fmm::detail
