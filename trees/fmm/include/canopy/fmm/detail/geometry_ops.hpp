// SPDX-License-Identifier: Apache-2.0
// The arithmetic of the cells' geometry and of the opening criterion, shared by the host
// (interaction_lists.hpp) and the device build (src/device_lists.cu), so that both give the same
// bits and therefore the same interaction lists: a criterion that compares two rounded numbers
// decides differently for a pair near its threshold if the numbers differ in the last bit.
//
// Why explicit rounding: nvcc contracts a * b + c into one fused multiply-add by default, which
// rounds once instead of twice; the host (x86-64 without -mfma, as this project builds) rounds
// twice. On the device every product and sum here goes through __dmul_rn / __dadd_rn, which are
// never contracted. A host build that contracts (-ffp-contract=fast with FMA hardware, e.g.
// -march=native or aarch64) may differ from the device for a pair exactly at the threshold.
//
// Portable (CANOPY_HD): g++ and nvcc.
#pragma once

#include <canopy/config.hpp>
#include <canopy/trees/box.hpp>
#include <canopy/trees/point.hpp>

namespace canopy::fmm::detail {

CANOPY_HD inline double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

CANOPY_HD inline double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

CANOPY_HD inline double sub_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

// A node's mass and mass-weighted coordinate sums. They are summed up the tree (a leaf over its
// points in order, a parent over its children in order), not over every point of the node: the
// same sum in exact arithmetic, O(points + nodes) instead of O(points x depth), and an order a
// level-by-level device pass reproduces bit for bit.
struct mass_sums {
  double m, x, y, z;
};

CANOPY_HD inline void add_point(mass_sums& s, const trees::point& q) {
  const double m = q.m;
  s.m = add_rn(s.m, m);
  s.x = add_rn(s.x, mul_rn(m, q.x));
  s.y = add_rn(s.y, mul_rn(m, q.y));
  s.z = add_rn(s.z, mul_rn(m, q.z));
}

CANOPY_HD inline void add_sums(mass_sums& s, const mass_sums& c) {
  s.m = add_rn(s.m, c.m);
  s.x = add_rn(s.x, c.x);
  s.y = add_rn(s.y, c.y);
  s.z = add_rn(s.z, c.z);
}

// The expansion centre: the centre of mass, or the cell's centre when the node is massless.
// (Division and 0.5 * (lo + hi) are correctly rounded on both sides and never contracted.)
CANOPY_HD inline void center_of(const mass_sums& s, const trees::box& b, double c[3]) {
  const double sums[3] = {s.x, s.y, s.z};
  for (int a = 0; a < 3; ++a) c[a] = s.m > 0 ? sums[a] / s.m : 0.5 * (b.lo[a] + b.hi[a]);
}

CANOPY_HD inline double squared_norm(double dx, double dy, double dz) {
  return add_rn(add_rn(mul_rn(dx, dx), mul_rn(dy, dy)), mul_rn(dz, dz));
}

// Squared distance from a point to a centre (the radius is the square root of the largest).
CANOPY_HD inline double distance2(const trees::point& q, const double c[3]) {
  return squared_norm(sub_rn(q.x, c[0]), sub_rn(q.y, c[1]), sub_rn(q.z, c[2]));
}

// r_A + r_B < theta |z_A - z_B|, compared squared (interaction_lists.hpp's well_separated).
CANOPY_HD inline bool separated(const double ca[3], double ra, const double cb[3], double rb, double theta) {
  const double d2 = squared_norm(sub_rn(ca[0], cb[0]), sub_rn(ca[1], cb[1]), sub_rn(ca[2], cb[2]));
  const double s = add_rn(ra, rb);
  return mul_rn(s, s) < mul_rn(mul_rn(theta, theta), d2);
}

}  // namespace canopy::fmm::detail
