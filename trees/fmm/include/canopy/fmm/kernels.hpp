// SPDX-License-Identifier: Apache-2.0
// The FMM kernels on Cartesian expansions (expansion.hpp has the formulas and the scaling):
// P2M, M2M, M2L, L2L, L2P, P2P, and M2P (a multipole evaluated at a point, as Barnes-Hut does).
// All are CANOPY_HD with fixed-size arrays on the stack: at P = 8 in double the largest (M2P)
// holds 220 derivatives and 165 scaled monomials, under 3.1 KB; M2L about 2.6 KB.
// Translations accumulate into their output (+=), so a target sums over its sources and a parent
// over its children without temporaries. Points are the octree's (x, y, z, m floats); the
// arithmetic is in T.
#pragma once

#include <canopy/config.hpp>
#include <canopy/fmm/expansion.hpp>
#include <canopy/trees/point.hpp>

#include <cstdint>

namespace canopy::fmm {

namespace detail {
// The contraction M2L and L2L share: the sum over the multi-indices m with |m| <= P - |j|, in the
// canonical order (m numbers them), of x(index of j + m) * y[m]. x is a reader, so that device code
// can read another task's expansion through L2 only (__ldcg). Products are commutative in IEEE
// arithmetic, so x * y gives the bits y * x did.
template <class T, int P, class X>
CANOPY_HD T shifted_contraction(X x, const T* y, int jx, int jy, int jz, int jo) {
  T sum = T(0);
  int m = 0;
  for (int mo = 0; mo <= P - jo; ++mo) {
    for (int mx = mo; mx >= 0; --mx) {
      for (int my = mo - mx; my >= 0; --my, ++m) sum += x(multi_index(jx + mx, jy + my, jz + mo - mx - my)) * y[m];
    }
  }
  return sum;
}

// f(j, jx, jy, jz, |j|) for every multi-index j with |j| <= P, in multi_index order.
template <int P, class F>
CANOPY_HD void for_each_multi_index(F f) {
  int j = 0;
  for (int jo = 0; jo <= P; ++jo) {
    for (int jx = jo; jx >= 0; --jx) {
      for (int jy = jo - jx; jy >= 0; --jy, ++j) f(j, jx, jy, jo - jx - jy, jo);
    }
  }
}

// The scaled monomials S_m((to - from) / s_from), |m| <= P, of a shift between two frames (M2M
// and L2L); returns the ratio s_to / s_from.
template <class T, int P>
CANOPY_HD T shift_monomials(const frame<T>& from, const frame<T>& to, T* s) {
  const T inv_s = T(1) / from.scale;
  scaled_monomials<T, P>((to.center[0] - from.center[0]) * inv_s, (to.center[1] - from.center[1]) * inv_s,
                         (to.center[2] - from.center[2]) * inv_s, s);
  return to.scale * inv_s;
}

// powers[o] = x^(o + 1), o <= P, each the last times x (the running product the loops kept).
template <class T, int P>
CANOPY_HD void powers_from(T x, T* powers) {
  powers[0] = x;
  for (int o = 1; o <= P; ++o) powers[o] = powers[o - 1] * x;
}
}  // namespace detail

// P2M: adds the points pts[0, n) to m, an expansion in frame f.
template <class T, int P>
CANOPY_HD void p2m(const trees::point* pts, std::int32_t n, const frame<T>& f, multipole_expansion<T, P>& m) {
  const T inv_s = T(1) / f.scale;
  T s[coefficient_count(P)];
  for (std::int32_t j = 0; j < n; ++j) {
    const T mass = T(pts[j].m);
    detail::scaled_monomials<T, P>((T(pts[j].x) - f.center[0]) * inv_s, (T(pts[j].y) - f.center[1]) * inv_s,
                                   (T(pts[j].z) - f.center[2]) * inv_s, s);
    for (int i = 0; i < coefficient_count(P); ++i) m.c[i] += mass * s[i];
  }
}

// M2M: adds a child's multipole (frame cf) to its parent's (frame pf). Exact: the parent's moment
// of order n depends only on the child's of orders <= n, so nothing is truncated.
//   Mt^A_n += sum_{k <= n} Mt^C_k rho^|k| S_{n-k}(d / s_A),  rho = s_C / s_A,  d = z_C - z_A.
template <class T, int P>
CANOPY_HD void m2m(const multipole_expansion<T, P>& child, const frame<T>& cf, const frame<T>& pf,
                   multipole_expansion<T, P>& parent) {
  T s[coefficient_count(P)];
  const T rho = detail::shift_monomials<T, P>(pf, cf, s);
  // The child's moments in the parent's units: Mt^C_k rho^|k|.
  T c[coefficient_count(P)];
  {
    T power = T(1);
    int idx = 0;
    for (int o = 0; o <= P; ++o, power *= rho) {
      for (int i = 0; i < (o + 1) * (o + 2) / 2; ++i, ++idx) c[idx] = child.c[idx] * power;
    }
  }
  int idx = 0;
  for (int o = 0; o <= P; ++o) {
    for (int nx = o; nx >= 0; --nx) {
      for (int ny = o - nx; ny >= 0; --ny, ++idx) {
        const int nz = o - nx - ny;
        T sum = T(0);
        for (int kx = 0; kx <= nx; ++kx) {
          for (int ky = 0; ky <= ny; ++ky) {
            for (int kz = 0; kz <= nz; ++kz) {
              sum += c[multi_index(kx, ky, kz)] * s[multi_index(nx - kx, ny - ky, nz - kz)];
            }
          }
        }
        parent.c[idx] += sum;
      }
    }
  }
}

// M2L: adds the field of a source multipole (frame sf) to a target's local expansion (frame tf),
// truncated at total order P. eps2 is the Plummer softening squared (0 for 1/r).
//   Ft^B_k += beta^(|k|+1) sum_{|n| <= P-|k|} (-alpha)^|n| Mt^A_n Dh_{n+k}
// with sigma = sqrt(|z_B - z_A|^2 + eps2), alpha = s_A / sigma, beta = s_B / sigma, and Dh the
// derivatives at (z_B - z_A) / sigma with softening eps2 / sigma^2 (so that Dh_0 = 1).
template <class T, int P>
CANOPY_HD void m2l(const multipole_expansion<T, P>& source, const frame<T>& sf, const frame<T>& tf, T eps2,
                   local_expansion<T, P>& target) {
  const T rx = tf.center[0] - sf.center[0], ry = tf.center[1] - sf.center[1], rz = tf.center[2] - sf.center[2];
  const T sigma = detail::square_root(rx * rx + ry * ry + rz * rz + eps2);
  const T inv_sigma = T(1) / sigma;
  T d[coefficient_count(P)];
  detail::derivative_tensor<T, P>(rx * inv_sigma, ry * inv_sigma, rz * inv_sigma, eps2 * inv_sigma * inv_sigma, d);
  // (-alpha)^|n| Mt^A_n
  T m[coefficient_count(P)];
  {
    const T alpha = -sf.scale * inv_sigma;
    T power = T(1);
    int idx = 0;
    for (int o = 0; o <= P; ++o, power *= alpha) {
      for (int i = 0; i < (o + 1) * (o + 2) / 2; ++i, ++idx) m[idx] = source.c[idx] * power;
    }
  }
  T beta_power[P + 1];  // beta^(|k|+1)
  detail::powers_from<T, P>(tf.scale * inv_sigma, beta_power);
  detail::for_each_multi_index<P>([&](int k, int kx, int ky, int kz, int ko) {
    target.c[k] += beta_power[ko] * detail::shifted_contraction<T, P>([&](int i) { return d[i]; }, m, kx, ky, kz, ko);
  });
}

// L2L: adds a parent's local expansion (frame pf) to its child's (frame cf). Exact: a local
// expansion is a polynomial of degree P, and re-centring a polynomial loses nothing.
//   Ft^C_j += (s_C / s_B)^(|j|+1) sum_{|m| <= P-|j|} Ft^B_{j+m} S_m(t / s_B),  t = z_C - z_B.
template <class T, int P>
CANOPY_HD void l2l(const local_expansion<T, P>& parent, const frame<T>& pf, const frame<T>& cf,
                   local_expansion<T, P>& child) {
  T s[coefficient_count(P)];
  T power[P + 1];  // (s_C / s_B)^(|j|+1)
  detail::powers_from<T, P>(detail::shift_monomials<T, P>(pf, cf, s), power);
  detail::for_each_multi_index<P>([&](int j, int jx, int jy, int jz, int jo) {
    child.c[j] += power[jo] * detail::shifted_contraction<T, P>([&](int i) { return parent.c[i]; }, s, jx, jy, jz, jo);
  });
}

// L2P: the potential and acceleration of a local expansion (frame f) at (x, y, z).
//   Psi = (1/s) sum_k Ft_k S_k(y),  d Psi / dx_i = (1/s^2) sum_{|k| <= P-1} Ft_{k+e_i} S_k(y),
// y = (x - z) / s; phi = -Psi, a = grad Psi.
template <class T, int P>
CANOPY_HD field<T> l2p(const local_expansion<T, P>& l, const frame<T>& f, T x, T y, T z) {
  const T inv_s = T(1) / f.scale;
  T s[coefficient_count(P)];
  detail::scaled_monomials<T, P>((x - f.center[0]) * inv_s, (y - f.center[1]) * inv_s, (z - f.center[2]) * inv_s, s);
  T psi = T(0), gx = T(0), gy = T(0), gz = T(0);
  int k = 0;
  for (int o = 0; o <= P; ++o) {
    for (int kx = o; kx >= 0; --kx) {
      for (int ky = o - kx; ky >= 0; --ky, ++k) {
        const int kz = o - kx - ky;
        psi += l.c[k] * s[k];
        if (o < P) {
          gx += l.c[multi_index(kx + 1, ky, kz)] * s[k];
          gy += l.c[multi_index(kx, ky + 1, kz)] * s[k];
          gz += l.c[multi_index(kx, ky, kz + 1)] * s[k];
        }
      }
    }
  }
  const T inv_s2 = inv_s * inv_s;
  return field<T>{gx * inv_s2, gy * inv_s2, gz * inv_s2, -psi * inv_s};
}

// M2P: the potential and acceleration of a multipole (frame f) at (x, y, z), softened by eps2:
// the Barnes-Hut evaluation at order P (the gradient uses derivatives of order P+1).
//   Psi = (1/sigma) sum_n (-alpha)^|n| Mt_n Dh_n,  d Psi / dx_i = (1/sigma^2) sum_n (-alpha)^|n| Mt_n Dh_{n+e_i}
template <class T, int P>
CANOPY_HD field<T> m2p(const multipole_expansion<T, P>& mp, const frame<T>& f, T eps2, T x, T y, T z) {
  const T rx = x - f.center[0], ry = y - f.center[1], rz = z - f.center[2];
  const T sigma = detail::square_root(rx * rx + ry * ry + rz * rz + eps2);
  const T inv_sigma = T(1) / sigma;
  T d[coefficient_count(P + 1)];
  detail::derivative_tensor<T, P + 1>(rx * inv_sigma, ry * inv_sigma, rz * inv_sigma, eps2 * inv_sigma * inv_sigma, d);
  const T alpha = -f.scale * inv_sigma;
  T power = T(1);
  T psi = T(0), gx = T(0), gy = T(0), gz = T(0);
  int n = 0;
  for (int o = 0; o <= P; ++o, power *= alpha) {
    for (int nx = o; nx >= 0; --nx) {
      for (int ny = o - nx; ny >= 0; --ny, ++n) {
        const int nz = o - nx - ny;
        const T w = mp.c[n] * power;
        psi += w * d[n];
        gx += w * d[multi_index(nx + 1, ny, nz)];
        gy += w * d[multi_index(nx, ny + 1, nz)];
        gz += w * d[multi_index(nx, ny, nz + 1)];
      }
    }
  }
  return field<T>{gx * inv_sigma * inv_sigma, gy * inv_sigma * inv_sigma, gz * inv_sigma * inv_sigma, -psi * inv_sigma};
}

// P2P: adds the softened field of sources src[0, n) at (x, y, z), skipping src[skip] (the target
// itself when it is one of the sources; -1 for none). The convention of examples/nbody's direct
// summation: phi -= m / sqrt(r^2 + eps2), a += m (x_j - x) / (r^2 + eps2)^(3/2). As there, two
// coincident points without softening give a non-finite field, which the caller sees.
template <class T>
CANOPY_HD void p2p(const trees::point* src, std::int32_t n, std::int32_t skip, T eps2, T x, T y, T z, field<T>& f) {
  for (std::int32_t j = 0; j < n; ++j) {
    if (j == skip) continue;
    const T dx = T(src[j].x) - x, dy = T(src[j].y) - y, dz = T(src[j].z) - z;
    const T r2 = dx * dx + dy * dy + dz * dz + eps2;
    const T inv_r = T(1) / detail::square_root(r2);
    const T m = T(src[j].m);
    const T w = m * inv_r * inv_r * inv_r;
    f.ax += w * dx;
    f.ay += w * dy;
    f.az += w * dz;
    f.phi -= m * inv_r;
  }
}

}  // namespace canopy::fmm
