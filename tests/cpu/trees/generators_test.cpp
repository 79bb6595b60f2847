// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/generators.hpp>
#include <canopy/trees/morton.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/threads.hpp>

#include "test_support.hpp"

#include <cmath>
#include <numeric>

namespace canopy::trees {
namespace {

using testing::expect_throw;
using testing::same_bits;

// Restores the default thread count when a test that changes it ends (or fails).
struct thread_count_guard {
  ~thread_count_guard() { set_host_threads(0); }
};

double total_mass(const std::vector<point>& pts) {
  double m = 0;
  for (const point& p : pts) m += p.m;
  return m;
}

TEST(Generators, ParseDistribution) {
  EXPECT_EQ(parse_distribution("uniform"), distribution::uniform);
  EXPECT_EQ(parse_distribution("Plummer"), distribution::plummer);
  EXPECT_EQ(parse_distribution("CLUSTERS"), distribution::clusters);
  EXPECT_EQ(parse_distribution("lattice"), distribution::lattice);
  for (distribution d : {distribution::uniform, distribution::plummer, distribution::clusters, distribution::lattice}) {
    EXPECT_EQ(parse_distribution(to_string(d)), d);
  }
  const input_error e = expect_throw<input_error>([] { parse_distribution("gaussian"); }, {"gaussian", "plummer"});
  EXPECT_EQ(e.source(), "distribution");
}

TEST(Generators, EmptyOutputs) {
  EXPECT_TRUE(generate_uniform(0, 1).empty());
  EXPECT_TRUE(generate_plummer(0, 1).empty());
  EXPECT_TRUE(generate_clusters(0, 1).empty());
}

TEST(Generators, UniformInUnitCubeWithUnitMass) {
  const auto pts = generate_uniform(100001, 5);
  ASSERT_EQ(pts.size(), 100001u);
  double mean[3] = {0, 0, 0};
  for (const point& p : pts) {
    ASSERT_GE(p.x, 0.0f);
    ASSERT_LT(p.x, 1.0f);
    ASSERT_GE(p.y, 0.0f);
    ASSERT_LT(p.y, 1.0f);
    ASSERT_GE(p.z, 0.0f);
    ASSERT_LT(p.z, 1.0f);
    mean[0] += p.x;
    mean[1] += p.y;
    mean[2] += p.z;
  }
  for (double m : mean) EXPECT_NEAR(m / pts.size(), 0.5, 0.005);  // sd of the mean: 0.29 / sqrt(1e5) ~ 0.001
  EXPECT_NEAR(total_mass(pts), 1.0, 1e-6);
}

TEST(Generators, PlummerIsBoundedWithTheRightHalfMassRadius) {
  const auto pts = generate_plummer(100000, 11);
  std::vector<double> r;
  double com[3] = {0, 0, 0};
  for (const point& p : pts) {
    const double rr = std::sqrt(double(p.x) * p.x + double(p.y) * p.y + double(p.z) * p.z);
    ASSERT_LE(rr, plummer_cutoff_radius * (1 + 1e-6));
    r.push_back(rr);
    com[0] += p.x;
    com[1] += p.y;
    com[2] += p.z;
  }
  std::nth_element(r.begin(), r.begin() + r.size() / 2, r.end());
  // Median radius of the Plummer profile cut at 10: M(<r) = r^3 / (1 + r^2)^1.5, and the cut keeps
  // M(<10) = 0.98518, so the median solves M(<r) = 0.49259: r = 1.2875.
  EXPECT_NEAR(r[r.size() / 2], 1.2875, 0.02);
  for (double c : com) EXPECT_NEAR(c / pts.size(), 0.0, 0.03);
  EXPECT_NEAR(total_mass(pts), 1.0, 1e-6);
}

TEST(Generators, ClustersAreNearTheirCentres) {
  const auto pts = generate_clusters(50000, 3, 4);
  std::size_t inside = 0;
  for (const point& p : pts) inside += p.x > -0.2f && p.x < 1.2f && p.y > -0.2f && p.y < 1.2f && p.z > -0.2f && p.z < 1.2f;
  EXPECT_EQ(inside, pts.size());  // centres in [0.1, 0.9), sigma < 0.05: 6 sigma away is beyond 1e-8
  EXPECT_NEAR(total_mass(pts), 1.0, 1e-6);
  expect_throw<input_error>([] { generate_clusters(10, 1, 0); }, {"clusters", "at least 1"});
}

TEST(Generators, SameSeedSameBitsOtherSeedOtherPoints) {
  EXPECT_TRUE(same_bits(generate_uniform(70000, 1), generate_uniform(70000, 1)));
  EXPECT_TRUE(same_bits(generate_plummer(70000, 1), generate_plummer(70000, 1)));
  EXPECT_TRUE(same_bits(generate_clusters(70000, 1), generate_clusters(70000, 1)));
  EXPECT_TRUE(same_bits(generate_lattice(3, 5, 1), generate_lattice(3, 5, 1)));
  EXPECT_FALSE(same_bits(generate_uniform(1000, 1), generate_uniform(1000, 2)));
  EXPECT_FALSE(same_bits(generate_plummer(1000, 1), generate_plummer(1000, 2)));
  EXPECT_FALSE(same_bits(generate_clusters(1000, 1), generate_clusters(1000, 2)));
  EXPECT_FALSE(same_bits(generate_lattice(2, 2, 1), generate_lattice(2, 2, 2)));
}

TEST(Generators, PrefixIsStableAcrossSizes) {
  // Chunks are seeded by index, so the first n points do not depend on how many follow.
  const auto small = generate_plummer(1000, 9);
  const auto large = generate_plummer(200000, 9);
  EXPECT_TRUE(std::equal(small.begin(), small.end(), large.begin(),
                         [](const point& a, const point& b) { return same_bits(a, point{b.x, b.y, b.z, a.m}); }));
}

TEST(Generators, SlicesAreTheWholeSetsPoints) {
  // A distributed run's ranks each make their slice: the same bits as the whole set's, for slices
  // that start and end inside chunks, cover several, are empty, or are the whole.
  const std::size_t n = 200003;
  for (const distribution d : {distribution::uniform, distribution::plummer, distribution::clusters}) {
    const std::vector<point> whole = d == distribution::uniform  ? generate_uniform(n, 5)
                                     : d == distribution::plummer ? generate_plummer(n, 5)
                                                                  : generate_clusters(n, 5);
    for (const auto& [b, e] : std::vector<std::pair<std::size_t, std::size_t>>{
             {0, n}, {0, 1}, {65535, 65537}, {1000, 140000}, {n - 7, n}, {70000, 70000}, {n, n}}) {
      const std::vector<point> slice = generate_slice(d, n, 5, b, e);
      ASSERT_EQ(slice.size(), e - b);
      EXPECT_TRUE(same_bits(slice, std::vector<point>(whole.begin() + static_cast<std::ptrdiff_t>(b),
                                                      whole.begin() + static_cast<std::ptrdiff_t>(e))))
          << to_string(d) << " [" << b << ", " << e << ")";
    }
  }
  EXPECT_THROW(generate_slice(distribution::plummer, 10, 1, 5, 11), input_error);
  EXPECT_THROW(generate_slice(distribution::plummer, 10, 1, 6, 5), input_error);
  EXPECT_THROW(generate_slice(distribution::lattice, 10, 1, 0, 5), input_error);
}

TEST(Generators, ResultDoesNotDependOnThreadCount) {
  thread_count_guard guard;
  set_host_threads(1);
  const auto u1 = generate_uniform(300000, 4), p1 = generate_plummer(300000, 4), c1 = generate_clusters(300000, 4);
  const auto l1 = generate_lattice(4, 40, 4);
  for (unsigned threads : {2u, 3u, 7u}) {
    set_host_threads(threads);
    EXPECT_TRUE(same_bits(u1, generate_uniform(300000, 4))) << threads;
    EXPECT_TRUE(same_bits(p1, generate_plummer(300000, 4))) << threads;
    EXPECT_TRUE(same_bits(c1, generate_clusters(300000, 4))) << threads;
    EXPECT_TRUE(same_bits(l1, generate_lattice(4, 40, 4))) << threads;
  }
}

TEST(Generators, LatticeHasExactlyPerLeafPointsInEachCellInMortonOrder) {
  for (int depth : {0, 1, 3}) {
    for (int per_leaf : {1, 3, 8}) {
      const auto pts = generate_lattice(depth, per_leaf, 17);
      const std::size_t cells = std::size_t{1} << (3 * depth);
      ASSERT_EQ(pts.size(), cells * per_leaf);
      const double scale = std::ldexp(1.0, depth);
      double mass = 0;
      for (std::size_t i = 0; i < pts.size(); ++i) {
        const point& p = pts[i];
        ASSERT_GT(p.m, 0.0f);
        mass += p.m;
        // The cell of point i is cell i / per_leaf in Morton order; half-open, so floor is exact.
        const auto cx = static_cast<std::uint32_t>(std::floor(p.x * scale));
        const auto cy = static_cast<std::uint32_t>(std::floor(p.y * scale));
        const auto cz = static_cast<std::uint32_t>(std::floor(p.z * scale));
        ASSERT_EQ(morton_encode(cx, cy, cz), i / per_leaf) << "depth " << depth << " point " << i;
      }
      EXPECT_NEAR(mass, 1.0, 0.5 / std::sqrt(double(pts.size())) * 4 + 1e-6);
    }
  }
}

TEST(Generators, LatticePointsStayInsideDeepCells) {
  // At depth 7 a cell is 2^-7 wide and floats near 1 have 2^-24 spacing: rounding to nearest would
  // put some jittered points on the upper face; rounding down must not.
  const auto pts = generate_lattice(7, 1, 5);
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const morton_cell c = morton_decode(i);
    ASSERT_LT(pts[i].x, (c.x + 1) / 128.0);
    ASSERT_GE(pts[i].x, c.x / 128.0);
  }
}

TEST(Generators, LatticeRejectsBadArguments) {
  expect_throw<input_error>([] { generate_lattice(-1, 1, 0); }, {"generate_lattice: depth", "[0, 21]"});
  expect_throw<input_error>([] { generate_lattice(22, 1, 0); }, {"generate_lattice: depth", "22"});
  expect_throw<input_error>([] { generate_lattice(2, 0, 0); }, {"generate_lattice: per_leaf", "at least 1"});
  expect_throw<input_error>([] { generate_lattice(11, 1, 0); }, {"2^31 - 1"});
  expect_throw<input_error>([] { generate_lattice(10, 3, 0); }, {"2^31 - 1"});
  expect_throw<input_error>([] { generate_lattice(21, 1, 0); }, {"2^31 - 1"});
}

}  // namespace
}  // namespace canopy::trees
