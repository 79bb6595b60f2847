// SPDX-License-Identifier: Apache-2.0
// Cartesian multipole and local expansions of order P for the (softened) gravitational potential,
// and the two tensors every kernel is built from: scaled monomials and the derivatives of the
// kernel. Portable: plain arithmetic, fixed-size arrays, no heap, so the same code runs in CUDA
// kernels (CANOPY_HD) and on the host.
//
// Why Cartesian and not solid harmonics: the kernel here is Plummer-softened,
// g(r) = 1 / sqrt(r^2 + eps^2), which is radial but not harmonic. Cartesian Taylor expansions work
// for any radial kernel with one recurrence (below), so the far field is exactly the softened
// direct sum's in the limit of large P, while solid harmonics exist only for the harmonic 1/r
// (eps = 0). Cartesian tensors also index multipoles and local expansions the same way, so every
// translation is a plain loop over multi-indices (Dehnen 2002, J. Comput. Phys. 179, 27;
// Dehnen 2014, Comput. Astrophys. Cosmol. 1, 1; Warren & Salmon 1995; exaFMM's Cartesian
// kernels). The price is the full (not traceless) tensor: (P+1)(P+2)(P+3)/6 coefficients, 165 at
// P = 8, and an M2L of C(P+6, 6) multiply-adds (3003 at P = 8).
//
// Notation (multi-indices n = (nx, ny, nz), |n| = nx + ny + nz, n! = nx! ny! nz!, v^n = vx^nx vy^ny
// vz^nz; S_n(v) = v^n / n!; D_n(R) = d^n g / dR^n):
//   multipole about z_A:   M_n = sum_j m_j S_n(x_j - z_A)
//   local about z_B:       F_k = d^k Psi / dx^k at z_B, so Psi(z_B + y) = sum_k F_k S_k(y)
// with Psi(x) = sum_j m_j g(x - x_j); the potential is phi = -Psi and the acceleration a = grad Psi
// (G = 1, the sign convention of examples/nbody/direct.hpp). Taylor's theorem gives
//   Psi(x) = sum_n (-1)^|n| M_n D_n(x - z_A)                          (M2P)
//   F_k    = sum_{|n| <= P - |k|} (-1)^|n| M_n D_{n+k}(z_B - z_A)      (M2L, total order <= P)
//   M_n(z_A) = sum_{k <= n} M_k(z_C) S_{n-k}(z_C - z_A)                (M2M, exact)
//   F_j(z_C) = sum_{|m| <= P - |j|} F_{j+m}(z_B) S_m(z_C - z_B)         (L2L, exact for the polynomial)
//
// Scaling. Unscaled, D_n(R) ~ (2|n|-1)!! / R^(2|n|+1) overflows float for small cells (P = 8 in a
// cell of edge 1e-3 needs R^-17 = 1e51). Every expansion therefore carries a length scale s (the
// octree uses half its cell's edge) and stores dimensionless coefficients
//   Mt_n = M_n / s^|n|,        Ft_k = F_k s^(|k|+1),
// and the kernel derivatives are taken at R / sigma with sigma = sqrt(R^2 + eps^2), where they are
// O(1) numbers. Every kernel then multiplies only by ratios of lengths that the opening criterion
// keeps below 1 (s_A / sigma, s_C / s_A, ...), whatever the units of the coordinates.
//
// Derivatives of the radial kernel: with u = r^2 / 2 and G_m = (d/du)^m g, for the Plummer kernel
// G_m = (-1)^m (2m-1)!! (r^2 + eps^2)^-(2m+1)/2, and the McMurchie-Davidson recurrence
// (McMurchie & Davidson 1978; Challacombe, Schwegler & Almlof 1996 for 1/r multipoles)
//   R^(m)_0 = G_m,   R^(m)_{n+e_i} = r_i R^(m+1)_n + n_i R^(m+1)_{n-e_i},   D_n = R^(0)_n
// fills all D_n of order <= Q in one array, overwriting level by level (derivative_tensor).
#pragma once

#include <canopy/config.hpp>

#include <cmath>
#include <type_traits>

namespace canopy::fmm {

// The orders the library is tested for (the Cartesian M2L grows as P^6).
inline constexpr int min_order = 2;
inline constexpr int max_order = 8;

// Number of multi-indices n with |n| <= q: (q+1)(q+2)(q+3)/6.
CANOPY_HD constexpr int coefficient_count(int q) { return (q + 1) * (q + 2) * (q + 3) / 6; }

// Linear index of the multi-index (nx, ny, nz): all of order 0, then order 1, ...; within an order
// by increasing ny + nz, then increasing nz. The nested loops
//   for s in 0..q, for nx = s..0, for ny = s-nx..0 (nz = s - nx - ny)
// visit the indices in increasing order, which the kernels use to keep a running index.
CANOPY_HD constexpr int multi_index(int nx, int ny, int nz) {
  const int s = nx + ny + nz, a = ny + nz;
  return s * (s + 1) * (s + 2) / 6 + a * (a + 1) / 2 + nz;
}

static_assert(coefficient_count(8) == 165);
static_assert(multi_index(0, 0, 0) == 0 && multi_index(1, 0, 0) == 1 && multi_index(0, 0, 1) == 3);
static_assert(multi_index(0, 0, 8) == coefficient_count(8) - 1);

// The coefficients of an expansion of order P, |n| <= P in multi_index order; Kind keeps multipole
// and local expansions apart as types (a kernel cannot take one for the other).
// Float expansions are 16-byte aligned (their size rounded up to whole float4s): a GPU lane reads
// another task's expansion with 16-byte loads past L1 (detail/register_kernels.cuh), where scalar loads
// would ask L2 for the same 32-byte sector up to eight times (a float4 of 35 coefficients, order 4,
// would otherwise straddle the next expansion).
template <class T, int P, class Kind>
struct alignas(sizeof(T) == 4 ? 16 : alignof(T)) expansion_coefficients {
  static_assert(P >= 0, "order must be >= 0");
  static constexpr int order = P;
  static constexpr int size = coefficient_count(P);
  T c[coefficient_count(P)];
};
struct multipole_kind {};
struct local_kind {};

// Multipole expansion of order P: Mt_n (see the header comment), |n| <= P.
template <class T, int P>
using multipole_expansion = expansion_coefficients<T, P, multipole_kind>;

// Local expansion of order P: Ft_k (see the header comment), |k| <= P.
template <class T, int P>
using local_expansion = expansion_coefficients<T, P, local_kind>;

static_assert(std::is_trivially_copyable_v<multipole_expansion<float, 8>>);
static_assert(std::is_trivially_copyable_v<local_expansion<double, 8>>);

// Where an expansion lives: its centre and its length scale (> 0).
template <class T>
struct frame {
  T center[3];
  T scale;
};

static_assert(std::is_trivially_copyable_v<frame<float>>);

// Potential and acceleration at a point (G = 1): phi = -sum m / r, a = -grad phi.
template <class T>
struct field {
  T ax, ay, az, phi;
};

template <class T, int P>
CANOPY_HD void set_zero(multipole_expansion<T, P>& m) {
  for (int i = 0; i < coefficient_count(P); ++i) m.c[i] = T(0);
}

template <class T, int P>
CANOPY_HD void set_zero(local_expansion<T, P>& l) {
  for (int i = 0; i < coefficient_count(P); ++i) l.c[i] = T(0);
}

namespace detail {

template <class T>
CANOPY_HD inline T square_root(T x) {
#if CANOPY_DEVICE_CODE
  if constexpr (sizeof(T) == sizeof(float)) {
    return ::sqrtf(x);
  } else {
    return ::sqrt(x);
  }
#else
  return std::sqrt(x);
#endif
}

// s[n] = v^n / n! for |n| <= Q, built order by order: S_{n} = S_{n - e_i} v_i / n_i for the first
// non-zero component i of n.
template <class T, int Q>
CANOPY_HD void scaled_monomials(T vx, T vy, T vz, T* s) {
  s[0] = T(1);
  int idx = 1;
  for (int o = 1; o <= Q; ++o) {
    for (int nx = o; nx >= 0; --nx) {
      for (int ny = o - nx; ny >= 0; --ny, ++idx) {
        const int nz = o - nx - ny;
        if (nx > 0) {
          s[idx] = s[multi_index(nx - 1, ny, nz)] * vx / T(nx);
        } else if (ny > 0) {
          s[idx] = s[multi_index(nx, ny - 1, nz)] * vy / T(ny);
        } else {
          s[idx] = s[multi_index(nx, ny, nz - 1)] * vz / T(nz);
        }
      }
    }
  }
}

// d[n] = D_n(r) for |n| <= Q: the derivatives of g(r) = (r^2 + e2)^(-1/2) by the in-place
// McMurchie-Davidson recurrence of the header comment. Stage m (Q down to 0) turns the array from
// R^(m+1) (orders <= Q-m-1) into R^(m) (orders <= Q-m); within a stage the orders are updated from
// the highest down, so each read of orders s-1 and s-2 still sees stage m+1's values.
// The callers pass r and e2 scaled so that r^2 + e2 = 1 (see scaling), where G_m = (-1)^m (2m-1)!!.
template <class T, int Q>
CANOPY_HD void derivative_tensor(T rx, T ry, T rz, T e2, T* d) {
  const T r2 = rx * rx + ry * ry + rz * rz + e2;
  const T inv_r2 = T(1) / r2;
  T g[Q + 1];
  g[0] = T(1) / square_root(r2);
  for (int m = 1; m <= Q; ++m) g[m] = -T(2 * m - 1) * inv_r2 * g[m - 1];
  for (int m = Q; m >= 0; --m) {
    for (int o = Q - m; o >= 1; --o) {
      int idx = multi_index(o, 0, 0);
      for (int nx = o; nx >= 0; --nx) {
        for (int ny = o - nx; ny >= 0; --ny, ++idx) {
          const int nz = o - nx - ny;
          if (nx > 0) {
            T v = rx * d[multi_index(nx - 1, ny, nz)];
            if (nx > 1) v += T(nx - 1) * d[multi_index(nx - 2, ny, nz)];
            d[idx] = v;
          } else if (ny > 0) {
            T v = ry * d[multi_index(nx, ny - 1, nz)];
            if (ny > 1) v += T(ny - 1) * d[multi_index(nx, ny - 2, nz)];
            d[idx] = v;
          } else {
            T v = rz * d[multi_index(nx, ny, nz - 1)];
            if (nz > 1) v += T(nz - 1) * d[multi_index(nx, ny, nz - 2)];
            d[idx] = v;
          }
        }
      }
    }
    d[0] = g[m];
  }
}

}  // namespace detail

}  // namespace canopy::fmm
