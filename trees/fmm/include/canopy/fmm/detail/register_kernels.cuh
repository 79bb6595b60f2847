// SPDX-License-Identifier: Apache-2.0
// kernels.hpp's M2L for one lane with every array in registers: the loops over
// multi-indices unrolled at compile time (static_for), so that each coefficient is a register and
// not an element of a per-thread array in local memory. The generic kernels index their arrays by
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

#include <type_traits>
#include <utility>

namespace canopy::fmm::detail {

// The highest order whose M2L runs from registers (the two tensors fit the 255-register budget).
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
// The source's coefficients are streamed (16-byte loads past L1: another task of the run wrote
// them), each used for all its k at once, so only Dh and t stay live.
template <int P>
__device__ __forceinline__ void m2l_pair_registers(const multipole_expansion<float, P>& source, const frame<float>& sf,
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
  const float4* chunks = reinterpret_cast<const float4*>(source.c);
  float4 chunk;
  static_for<N>([&](auto ni) {
    constexpr int n = decltype(ni)::value;
    constexpr int on = multi_of(n).order;
    if constexpr (n % 4 == 0) chunk = __ldcg(chunks + n / 4);
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

}  // namespace canopy::fmm::detail
