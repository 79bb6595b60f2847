// SPDX-License-Identifier: Apache-2.0
// Each FMM kernel on its own against direct evaluation: the derivative tensor against closed forms,
// Laplace's equation and finite differences; P2M + M2P, M2M, M2L + L2P, L2L and P2P against direct
// sums over well-separated clusters, with the error falling as the order grows.
#include <canopy/fmm/kernels.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "fmm_test_support.hpp"

namespace {

namespace cf = canopy::fmm;
namespace ct = canopy::trees;
using fmm_test::acceleration_error;
using fmm_test::ball;
using fmm_test::direct_field;
using fmm_test::potential_error;

// Calls f.template operator()<P>() for P = 2..8, collecting the returned errors by order.
template <class F>
std::array<double, 9> over_orders(F&& f) {
  std::array<double, 9> e{};
  [&]<int... I>(std::integer_sequence<int, I...>) { ((e[I + 2] = f.template operator()<I + 2>()), ...); }(
      std::make_integer_sequence<int, 7>{});
  return e;
}

template <class T>
cf::frame<T> frame_at(const double c[3], double scale) {
  return cf::frame<T>{{T(c[0]), T(c[1]), T(c[2])}, T(scale)};
}

// Centre of mass of pts, in double.
std::array<double, 3> com(const std::vector<ct::point>& pts) {
  double m = 0, c[3] = {0, 0, 0};
  for (const auto& p : pts) {
    m += p.m;
    c[0] += double(p.m) * p.x;
    c[1] += double(p.m) * p.y;
    c[2] += double(p.m) * p.z;
  }
  return {c[0] / m, c[1] / m, c[2] / m};
}

void print_errors(const char* what, const std::array<double, 9>& e) {
  std::printf("%-28s", what);
  for (int p = 2; p <= 8; ++p) std::printf("  p%d %.1e", p, e[static_cast<std::size_t>(p)]);
  std::printf("\n");
}

// ---- derivative tensor ---------------------------------------------------------------------------

TEST(FmmDerivatives, LowOrdersMatchClosedForms) {
  // D of g = (r^2 + e2)^-1/2: d/dx = -x/R^3, d2/dx2 = 3x^2/R^5 - 1/R^3, d2/dxdy = 3xy/R^5.
  for (const double e2 : {0.0, 0.3}) {
    const double x = 0.3, y = -0.7, z = 0.5;
    double d[cf::coefficient_count(2)];
    cf::detail::derivative_tensor<double, 2>(x, y, z, e2, d);
    const double R = std::sqrt(x * x + y * y + z * z + e2);
    const double R3 = R * R * R, R5 = R3 * R * R;
    EXPECT_NEAR(d[0], 1 / R, 1e-15);
    EXPECT_NEAR(d[cf::multi_index(1, 0, 0)], -x / R3, 1e-15);
    EXPECT_NEAR(d[cf::multi_index(0, 1, 0)], -y / R3, 1e-15);
    EXPECT_NEAR(d[cf::multi_index(0, 0, 1)], -z / R3, 1e-15);
    EXPECT_NEAR(d[cf::multi_index(2, 0, 0)], 3 * x * x / R5 - 1 / R3, 1e-14);
    EXPECT_NEAR(d[cf::multi_index(1, 1, 0)], 3 * x * y / R5, 1e-14);
    EXPECT_NEAR(d[cf::multi_index(0, 1, 1)], 3 * y * z / R5, 1e-14);
    EXPECT_NEAR(d[cf::multi_index(0, 0, 2)], 3 * z * z / R5 - 1 / R3, 1e-14);
  }
}

TEST(FmmDerivatives, HarmonicWithoutSofteningAtEveryOrder) {
  // 1/r solves Laplace's equation away from 0, so D_{n+2x} + D_{n+2y} + D_{n+2z} = 0 for all n.
  constexpr int Q = 9;
  double d[cf::coefficient_count(Q)];
  cf::detail::derivative_tensor<double, Q>(0.48, -0.6, 0.64, 0.0, d);  // |r| = 1
  for (int o = 0; o <= Q - 2; ++o)
    for (int nx = o; nx >= 0; --nx)
      for (int ny = o - nx; ny >= 0; --ny) {
        const int nz = o - nx - ny;
        const double lap = d[cf::multi_index(nx + 2, ny, nz)] + d[cf::multi_index(nx, ny + 2, nz)] +
                           d[cf::multi_index(nx, ny, nz + 2)];
        const double scale = std::abs(d[cf::multi_index(nx + 2, ny, nz)]) + std::abs(d[cf::multi_index(nx, ny, nz + 2)]) + 1;
        EXPECT_NEAR(lap, 0.0, 1e-12 * scale) << "n = (" << nx << ", " << ny << ", " << nz << ")";
      }
}

TEST(FmmDerivatives, EachOrderIsTheDerivativeOfTheOneBelow) {
  // Central differences of order-s entries against the order-(s+1) entries, softened and not.
  constexpr int Q = 8;
  const double h = 1e-5;
  for (const double e2 : {0.0, 0.2}) {
    const double r[3] = {0.9, 0.4, -0.5};
    double d[cf::coefficient_count(Q)];
    cf::detail::derivative_tensor<double, Q>(r[0], r[1], r[2], e2, d);
    for (int axis = 0; axis < 3; ++axis) {
      double up[cf::coefficient_count(Q)], down[cf::coefficient_count(Q)];
      double a[3] = {r[0], r[1], r[2]}, b[3] = {r[0], r[1], r[2]};
      a[axis] += h;
      b[axis] -= h;
      cf::detail::derivative_tensor<double, Q>(a[0], a[1], a[2], e2, up);
      cf::detail::derivative_tensor<double, Q>(b[0], b[1], b[2], e2, down);
      for (int o = 0; o < Q; ++o)
        for (int nx = o; nx >= 0; --nx)
          for (int ny = o - nx; ny >= 0; --ny) {
            const int nz = o - nx - ny;
            const int i = cf::multi_index(nx, ny, nz);
            const int j = cf::multi_index(nx + (axis == 0), ny + (axis == 1), nz + (axis == 2));
            const double fd = (up[i] - down[i]) / (2 * h);
            EXPECT_NEAR(fd, d[j], 1e-6 * (std::abs(d[j]) + 1)) << "order " << o << " axis " << axis << " e2 " << e2;
          }
    }
  }
}

// ---- P2M and M2P -----------------------------------------------------------------------------------

// The field of a cluster of radius 0.5 at 24 points at distance 3 (ratio 1/6), through P2M + M2P,
// against the direct sum. Worst relative error over the points.
template <class T, int P>
std::pair<double, double> p2m_m2p_error(double eps2) {
  const double c[3] = {0.2, -0.1, 0.3};
  const auto src = ball(300, c, 0.5, 11);
  const cf::frame<T> f = frame_at<T>(com(src).data(), 0.5);
  cf::multipole_expansion<T, P> m;
  cf::set_zero(m);
  cf::p2m(src.data(), static_cast<std::int32_t>(src.size()), f, m);
  const double far[3] = {0, 0, 0};
  const auto dirs = ball(24, far, 1.0, 12);
  double ea = 0, ep = 0;
  for (const auto& d : dirs) {
    const double n = std::sqrt(double(d.x) * d.x + double(d.y) * d.y + double(d.z) * d.z);
    const double x = c[0] + 3 * d.x / n, y = c[1] + 3 * d.y / n, z = c[2] + 3 * d.z / n;
    const cf::field<T> got = cf::m2p(m, f, T(eps2), T(x), T(y), T(z));
    const cf::field<double> want = direct_field(src, x, y, z, eps2);
    ea = std::max(ea, acceleration_error(got, want));
    ep = std::max(ep, potential_error(got, want));
  }
  return {ea, ep};
}

TEST(FmmKernels, P2mThenM2pMatchesDirectSumAndConvergesWithOrder) {
  for (const double eps2 : {0.0, 0.05}) {
    const auto acc = over_orders([&]<int P>() { return p2m_m2p_error<double, P>(eps2).first; });
    const auto pot = over_orders([&]<int P>() { return p2m_m2p_error<double, P>(eps2).second; });
    print_errors(eps2 > 0 ? "P2M+M2P acc (eps2 0.05)" : "P2M+M2P acc", acc);
    print_errors(eps2 > 0 ? "P2M+M2P phi (eps2 0.05)" : "P2M+M2P phi", pot);
    for (int p = 2; p <= 8; ++p) {
      // The remainder of an order-P expansion is O((a/R)^(P+1)) = 6^-(P+1) here (a = 0.5, R = 3);
      // the constant (a few) covers the gradient's extra factor P+1 and the cluster's shape.
      const double bound = 4.0 * (p + 1) * std::pow(1.0 / 6.0, p + 1);
      EXPECT_LT(acc[static_cast<std::size_t>(p)], bound) << "p = " << p << ", eps2 = " << eps2;
      EXPECT_LT(pot[static_cast<std::size_t>(p)], bound) << "p = " << p << ", eps2 = " << eps2;
    }
    EXPECT_LT(acc[8], 1e-4 * acc[2]);
    EXPECT_LT(pot[8], 1e-4 * pot[2]);
  }
}

// ---- M2M -----------------------------------------------------------------------------------------

template <class T, int P>
struct octants {
  std::vector<ct::point> all;
  cf::frame<T> parent;
  cf::multipole_expansion<T, P> direct;   // P2M of all points in the parent's frame
  cf::multipole_expansion<T, P> shifted;  // P2M in each child's frame, then M2M
};

// Eight clusters, one in each octant of the cube [-1, 1]^3 about (0.1, -0.05, 0.02).
template <class T, int P>
octants<T, P> make_octants() {
  octants<T, P> o;
  const double pc[3] = {0.1, -0.05, 0.02};
  o.parent = frame_at<T>(pc, 1.0);
  cf::set_zero(o.direct);
  cf::set_zero(o.shifted);
  for (int k = 0; k < 8; ++k) {
    const double cc[3] = {pc[0] + ((k & 1) ? 0.5 : -0.5), pc[1] + ((k & 2) ? 0.5 : -0.5), pc[2] + ((k & 4) ? 0.5 : -0.5)};
    const auto pts = ball(40 + 5 * static_cast<std::size_t>(k), cc, 0.45, 100 + static_cast<std::uint64_t>(k));
    const cf::frame<T> child = frame_at<T>(com(pts).data(), 0.5);
    cf::multipole_expansion<T, P> m;
    cf::set_zero(m);
    cf::p2m(pts.data(), static_cast<std::int32_t>(pts.size()), child, m);
    cf::m2m(m, child, o.parent, o.shifted);
    o.all.insert(o.all.end(), pts.begin(), pts.end());
  }
  cf::p2m(o.all.data(), static_cast<std::int32_t>(o.all.size()), o.parent, o.direct);
  return o;
}

TEST(FmmKernels, M2mEqualsP2mOfTheUnionCoefficientByCoefficient) {
  // The shift of a Cartesian multipole is exact (no truncation): only rounding may differ.
  over_orders([&]<int P>() {
    const auto o = make_octants<double, P>();
    double largest = 0;
    for (int i = 0; i < cf::coefficient_count(P); ++i) largest = std::max(largest, std::abs(o.direct.c[i]));
    for (int i = 0; i < cf::coefficient_count(P); ++i)
      EXPECT_NEAR(o.shifted.c[i], o.direct.c[i], 1e-12 * largest) << "P = " << P << ", coefficient " << i;
    return 0.0;
  });
}

TEST(FmmKernels, M2mPreservesTheFarField) {
  const auto err = over_orders([&]<int P>() {
    const auto o = make_octants<double, P>();
    const double origin[3] = {0, 0, 0};
    double worst = 0;
    for (const auto& d : ball(16, origin, 1.0, 7)) {
      const double n = std::sqrt(double(d.x) * d.x + double(d.y) * d.y + double(d.z) * d.z);
      const double x = 0.1 + 8 * d.x / n, y = -0.05 + 8 * d.y / n, z = 0.02 + 8 * d.z / n;
      worst = std::max(worst, acceleration_error(cf::m2p(o.shifted, o.parent, 0.0, x, y, z), direct_field(o.all, x, y, z, 0)));
    }
    return worst;
  });
  print_errors("M2M then M2P acc", err);
  // Points reach sqrt(3) * 0.95 of the centre; at distance 8 the ratio is about 0.21.
  for (int p = 2; p <= 8; ++p) EXPECT_LT(err[static_cast<std::size_t>(p)], 4.0 * (p + 1) * std::pow(0.21, p + 1)) << p;
  EXPECT_LT(err[8], 1e-3 * err[2]);
}

// ---- M2L and L2P ---------------------------------------------------------------------------------

// Source cluster of radius 0.5 and a target ball of radius 0.5 whose centres are 4 apart (the
// criterion's (r_A + r_B) / d = 0.25): M2L, then L2P at 64 points of the target ball, against the
// direct sum. Worst relative errors (acceleration, potential).
template <class T, int P>
std::pair<double, double> m2l_l2p_error(double eps2, double length = 1.0) {
  const double sc[3] = {0.1 * length, 0.2 * length, -0.1 * length};
  const double tc[3] = {sc[0] + 3.2 * length, sc[1] - 2.4 * length, sc[2]};  // 4 away
  const auto src = ball(300, sc, 0.5 * length, 21);
  const auto tgt = ball(64, tc, 0.5 * length, 22);
  const cf::frame<T> sf = frame_at<T>(com(src).data(), 0.5 * length);
  const cf::frame<T> tf = frame_at<T>(tc, 0.5 * length);
  cf::multipole_expansion<T, P> m;
  cf::set_zero(m);
  cf::p2m(src.data(), static_cast<std::int32_t>(src.size()), sf, m);
  cf::local_expansion<T, P> l;
  cf::set_zero(l);
  cf::m2l(m, sf, tf, T(eps2), l);
  double ea = 0, ep = 0;
  for (const auto& q : tgt) {
    const cf::field<T> got = cf::l2p(l, tf, T(q.x), T(q.y), T(q.z));
    const cf::field<double> want = direct_field(src, q.x, q.y, q.z, eps2);
    ea = std::max(ea, acceleration_error(got, want));
    ep = std::max(ep, potential_error(got, want));
  }
  return {ea, ep};
}

TEST(FmmKernels, M2lThenL2pMatchesDirectSumAndConvergesWithOrder) {
  for (const double eps2 : {0.0, 0.1}) {
    const auto acc = over_orders([&]<int P>() { return m2l_l2p_error<double, P>(eps2).first; });
    const auto pot = over_orders([&]<int P>() { return m2l_l2p_error<double, P>(eps2).second; });
    print_errors(eps2 > 0 ? "M2L+L2P acc (eps2 0.1)" : "M2L+L2P acc", acc);
    print_errors(eps2 > 0 ? "M2L+L2P phi (eps2 0.1)" : "M2L+L2P phi", pot);
    for (int p = 2; p <= 8; ++p) {
      const double bound = 4.0 * (p + 1) * (p + 1) * std::pow(0.25, p + 1);
      EXPECT_LT(acc[static_cast<std::size_t>(p)], bound) << "p = " << p << ", eps2 = " << eps2;
      EXPECT_LT(pot[static_cast<std::size_t>(p)], bound) << "p = " << p << ", eps2 = " << eps2;
    }
    for (int p = 2; p <= 6; p += 2) EXPECT_LT(acc[static_cast<std::size_t>(p + 2)], 0.2 * acc[static_cast<std::size_t>(p)]) << p;
    EXPECT_LT(acc[8], 1e-3 * acc[2]);
  }
}

TEST(FmmKernels, FloatExpansionsOfTinyCellsStayFiniteAndAccurate) {
  // Cells of edge 1e-6: unscaled, an order-8 M2L would need R^-17 = 1e100, far beyond float. The
  // scaled coefficients keep every number O(1); the error is the double's plus float rounding.
  for (const double length : {1e-6, 1e4}) {
    const auto f = m2l_l2p_error<float, 8>(0.0, length);
    const auto d = m2l_l2p_error<double, 8>(0.0, length);
    EXPECT_TRUE(std::isfinite(f.first) && std::isfinite(f.second)) << length;
    EXPECT_LT(f.first, d.first + 1e-5) << length;
    EXPECT_LT(f.second, d.second + 1e-5) << length;
  }
}

// ---- L2L -----------------------------------------------------------------------------------------

TEST(FmmKernels, L2lIsExactAndKeepsTheFarField) {
  // A parent local expansion (centre 4 from the sources, scale 1) shifted into a child of scale 0.5:
  // the shifted polynomial equals the parent's at every point (exact re-centring), and both match
  // the direct sum to the M2L's truncation error.
  const auto err = over_orders([&]<int P>() {
    const double sc[3] = {0, 0, 0}, pc[3] = {4, 0, 0}, cc[3] = {4.4, -0.3, 0.35};
    const auto src = ball(200, sc, 0.5, 31);
    const cf::frame<double> sf = frame_at<double>(com(src).data(), 0.5);
    const cf::frame<double> pf = frame_at<double>(pc, 1.0), chf = frame_at<double>(cc, 0.5);
    cf::multipole_expansion<double, P> m;
    cf::set_zero(m);
    cf::p2m(src.data(), static_cast<std::int32_t>(src.size()), sf, m);
    cf::local_expansion<double, P> parent, child;
    cf::set_zero(parent);
    cf::set_zero(child);
    cf::m2l(m, sf, pf, 0.0, parent);
    cf::l2l(parent, pf, chf, child);
    double worst = 0;
    for (const auto& q : ball(32, cc, 0.45, 32)) {
      const cf::field<double> a = cf::l2p(child, chf, double(q.x), double(q.y), double(q.z));
      const cf::field<double> b = cf::l2p(parent, pf, double(q.x), double(q.y), double(q.z));
      EXPECT_NEAR(a.phi, b.phi, 1e-12 * std::abs(b.phi)) << "P = " << P;
      EXPECT_NEAR(a.ax, b.ax, 1e-11 * std::abs(b.ax) + 1e-13) << "P = " << P;
      EXPECT_NEAR(a.ay, b.ay, 1e-11 * std::abs(b.ax) + 1e-13) << "P = " << P;
      EXPECT_NEAR(a.az, b.az, 1e-11 * std::abs(b.ax) + 1e-13) << "P = " << P;
      worst = std::max(worst, acceleration_error(a, direct_field(src, q.x, q.y, q.z, 0)));
    }
    return worst;
  });
  print_errors("M2L+L2L+L2P acc", err);
  // The child's points reach about 1.0 from the parent's centre, 4 from the sources' (ratio 0.375).
  EXPECT_LT(err[8], 1e-3 * err[2]);
  EXPECT_LT(err[8], 1e-4);
}

// ---- P2P -----------------------------------------------------------------------------------------

TEST(FmmKernels, P2pIsTheSoftenedDirectSumWithoutTheSkippedPoint) {
  const double c[3] = {0, 0, 0};
  const auto pts = ball(50, c, 1.0, 41);
  for (const double eps2 : {0.0, 1e-3}) {
    for (const std::int32_t skip : {-1, 0, 17, 49}) {
      const ct::point q = pts[static_cast<std::size_t>(skip < 0 ? 3 : skip)];
      const double x = skip < 0 ? 2.5 : q.x, y = skip < 0 ? 0.1 : q.y, z = skip < 0 ? -0.2 : q.z;
      cf::field<double> got{0, 0, 0, 0};
      cf::p2p(pts.data(), 50, skip, eps2, x, y, z, got);
      const cf::field<double> want = direct_field(pts, x, y, z, eps2, skip);
      EXPECT_NEAR(got.ax, want.ax, 1e-12 * std::abs(want.phi));
      EXPECT_NEAR(got.ay, want.ay, 1e-12 * std::abs(want.phi));
      EXPECT_NEAR(got.az, want.az, 1e-12 * std::abs(want.phi));
      EXPECT_NEAR(got.phi, want.phi, 1e-12 * std::abs(want.phi));
    }
  }
}

}  // namespace
