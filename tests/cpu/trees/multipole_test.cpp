// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/generators.hpp>
#include <canopy/trees/multipole.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace canopy::trees {
namespace {

template <class T>
bool same_bits(const multipole<T>& a, const multipole<T>& b) {
  return std::memcmp(&a, &b, sizeof(multipole<T>)) == 0;
}

// Moments agree to `tol` relative to the natural scales (mass; com and bbox to `len`; m2 to mass*len^2).
void expect_close(const multipole<double>& a, const multipole<double>& b, double len, double tol) {
  EXPECT_EQ(a.count, b.count);
  EXPECT_NEAR(a.mass, b.mass, tol * b.mass);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(a.com[i], b.com[i], tol * len) << i;
    EXPECT_EQ(a.lo[i], b.lo[i]);
    EXPECT_EQ(a.hi[i], b.hi[i]);
  }
  for (int k = 0; k < 6; ++k) EXPECT_NEAR(a.m2[k], b.m2[k], tol * b.mass * len * len) << k;
}

TEST(Multipole, IdentityIsEmpty) {
  const auto id = multipole_identity<float>();
  EXPECT_EQ(id.count, 0u);
  EXPECT_EQ(id.mass, 0.0f);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::isinf(id.lo[i]) && id.lo[i] > 0);
    EXPECT_TRUE(std::isinf(id.hi[i]) && id.hi[i] < 0);
  }
  EXPECT_TRUE(same_bits(p2m<float>(nullptr, 0), id));
}

TEST(Multipole, IdentityMergesToTheOtherSideBitForBit) {
  const auto pts = generate_plummer(100, 1);
  const auto m = p2m<float>(pts.data(), 100);
  EXPECT_TRUE(same_bits(m2m_merge(multipole_identity<float>(), m), m));
  EXPECT_TRUE(same_bits(m2m_merge(m, multipole_identity<float>()), m));
  const auto id = multipole_identity<double>();
  EXPECT_TRUE(same_bits(m2m_merge(id, id), id));
}

TEST(Multipole, TwoPointsClosedForm) {
  // Masses 1 and 3 at x = 0 and x = 4: com 3, m2_xx = 1*9 + 3*1 = 12 = (1*3/4) * 4^2.
  const point pts[2] = {{0.0f, 1.0f, 2.0f, 1.0f}, {4.0f, 1.0f, 2.0f, 3.0f}};
  const auto m = p2m<double>(pts, 2);
  EXPECT_EQ(m.count, 2u);
  EXPECT_DOUBLE_EQ(m.mass, 4.0);
  EXPECT_DOUBLE_EQ(m.com[0], 3.0);
  EXPECT_DOUBLE_EQ(m.com[1], 1.0);
  EXPECT_DOUBLE_EQ(m.com[2], 2.0);
  EXPECT_DOUBLE_EQ(m.m2[0], 12.0);
  for (int k = 1; k < 6; ++k) EXPECT_DOUBLE_EQ(m.m2[k], 0.0);
  EXPECT_EQ(m.lo[0], 0.0);
  EXPECT_EQ(m.hi[0], 4.0);
  // The same through a merge of the single points (parallel-axis shift).
  const auto merged = m2m_merge(p2m<double>(pts, 1), p2m<double>(pts + 1, 1));
  expect_close(merged, m, 4.0, 1e-15);
}

TEST(Multipole, MergeEqualsMomentsOfTheUnion) {
  const auto pts = generate_clusters(3000, 6, 3);
  const auto whole = p2m<double>(pts.data(), 3000);
  for (std::int32_t split : {1, 17, 1500, 2999}) {
    const auto merged = m2m_merge(p2m<double>(pts.data(), split), p2m<double>(pts.data() + split, 3000 - split));
    expect_close(merged, whole, 1.0, 1e-13);
  }
}

TEST(Multipole, MergeIsAssociativeAndCommutative) {
  const auto pts = generate_plummer(999, 2);
  const auto a = p2m<double>(pts.data(), 100), b = p2m<double>(pts.data() + 100, 400), c = p2m<double>(pts.data() + 500, 499);
  const auto left = m2m_merge(m2m_merge(a, b), c);
  const auto right = m2m_merge(a, m2m_merge(b, c));
  const auto swapped = m2m_merge(c, m2m_merge(b, a));
  expect_close(left, right, 10.0, 1e-13);
  expect_close(swapped, right, 10.0, 1e-13);
}

TEST(Multipole, MasslessPointsUseTheCentroid) {
  const point pts[3] = {{0.0f, 0.0f, 0.0f, 0.0f}, {3.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 6.0f, 0.0f, 0.0f}};
  const auto m = p2m<double>(pts, 3);
  EXPECT_EQ(m.count, 3u);
  EXPECT_EQ(m.mass, 0.0);
  EXPECT_DOUBLE_EQ(m.com[0], 1.0);
  EXPECT_DOUBLE_EQ(m.com[1], 2.0);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(m.m2[k], 0.0);
  // Merging massless parts gives the same centroid (count-weighted), never a division by zero.
  const auto merged = m2m_merge(p2m<double>(pts, 1), p2m<double>(pts + 1, 2));
  expect_close(merged, m, 6.0, 1e-15);
  EXPECT_DOUBLE_EQ(merged.com[0], 1.0);
  EXPECT_DOUBLE_EQ(merged.com[1], 2.0);
}

TEST(Multipole, MasslessSideDoesNotMoveTheCom) {
  std::vector<point> pts = generate_uniform(50, 3);
  for (int i = 0; i < 20; ++i) pts[i].m = 0.0f;
  const auto whole = p2m<double>(pts.data(), 50);
  const auto merged = m2m_merge(p2m<double>(pts.data(), 20), p2m<double>(pts.data() + 20, 30));
  expect_close(merged, whole, 1.0, 1e-14);
}

TEST(Multipole, FloatAgreesWithDouble) {
  const auto pts = generate_plummer(64, 4);
  const auto f = p2m<float>(pts.data(), 64);
  const auto d = p2m<double>(pts.data(), 64);
  EXPECT_EQ(f.count, d.count);
  EXPECT_NEAR(f.mass, d.mass, 64 * 6e-8 * d.mass);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(f.com[i], d.com[i], 1e-5 * 10);
    EXPECT_EQ(double(f.lo[i]), d.lo[i]);  // min/max of the same floats: exact
    EXPECT_EQ(double(f.hi[i]), d.hi[i]);
  }
  for (int k = 0; k < 6; ++k) EXPECT_NEAR(f.m2[k], d.m2[k], 1e-4 * d.mass * 100);
}

TEST(Multipole, TracelessQuadrupole) {
  const auto pts = generate_clusters(500, 1, 2);
  const auto m = p2m<double>(pts.data(), 500);
  const auto q = traceless_quadrupole(m);
  EXPECT_NEAR(q.q[0] + q.q[3] + q.q[5], 0.0, 1e-15);
  // Direct sum of m (3 d d^T - |d|^2 I).
  double xx = 0, xy = 0;
  for (const point& p : pts) {
    const double dx = p.x - m.com[0], dy = p.y - m.com[1], dz = p.z - m.com[2];
    const double m = p.m;
    xx += m * (3 * dx * dx - (dx * dx + dy * dy + dz * dz));
    xy += m * 3 * dx * dy;
  }
  EXPECT_NEAR(q.q[0], xx, 1e-12);
  EXPECT_NEAR(q.q[1], xy, 1e-12);
}

// A leaf of at most p2m_block points gets the bits of the plain two-pass loop: adding one block's
// sum to a zero compensated sum is exact (trees with small leaves kept their payloads bit for bit).
TEST(Multipole, SmallLeavesKeepThePlainLoopsBits) {
  const auto pts = generate_plummer(p2m_block, 3);
  const multipole<float> got = p2m<float>(pts.data(), p2m_block);
  float mass = 0, sx = 0, sy = 0, sz = 0;
  for (const point& p : pts) {
    mass += p.m;
    sx += p.m * p.x;
    sy += p.m * p.y;
    sz += p.m * p.z;
  }
  const float com[3] = {sx / mass, sy / mass, sz / mass};
  float xx = 0;
  for (const point& p : pts) xx += p.m * (p.x - com[0]) * (p.x - com[0]);
  EXPECT_EQ(std::memcmp(&got.mass, &mass, sizeof mass), 0);
  EXPECT_EQ(std::memcmp(got.com, com, sizeof com), 0);
  EXPECT_EQ(std::memcmp(&got.m2[0], &xx, sizeof xx), 0);
}

// One leaf of 4M points: plain float summation of 4M masses near 1e-7 drifts by percent (8M
// points at max depth 0 summed to 0.9606 for 1); the blocked compensated sums stay at float's
// precision, for the mass, the centre of mass and the second moments alike.
TEST(Multipole, AHugeLeafIsSummedAccurately) {
  const std::int32_t n = 1 << 22;
  auto pts = generate_uniform(static_cast<std::size_t>(n), 5);
  for (std::size_t i = 0; i < pts.size(); ++i) pts[i].m = 1e-7f * (1.0f + 0.1f * static_cast<float>(i % 7));  // not powers of 2
  const multipole<float> f = p2m<float>(pts.data(), n);
  const multipole<double> d = p2m<double>(pts.data(), n);
  EXPECT_NEAR(f.mass, d.mass, 4e-6 * d.mass);
  for (int a = 0; a < 3; ++a) EXPECT_NEAR(f.com[a], d.com[a], 4e-6);
  for (int k = 0; k < 6; ++k) EXPECT_NEAR(f.m2[k], d.m2[k], 4e-6 * d.mass);
  float plain = 0;
  for (const point& p : pts) plain += p.m;
  EXPECT_GT(std::abs(plain - d.mass), 100 * std::abs(f.mass - d.mass));  // what the blocks fixed
}

}  // namespace
}  // namespace canopy::trees
