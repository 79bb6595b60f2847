// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/generators.hpp>
#include <canopy/trees/reference.hpp>

#include "test_support.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace canopy::trees {
namespace {

// The float upward pass as a GPU backend computes it (same order as the reference, float math).
std::vector<multipole<float>> float_upward_pass(const octree& t) {
  std::vector<multipole<float>> out(static_cast<std::size_t>(t.node_count()));
  for (int l = t.depth; l >= 0; --l) {
    for (std::int32_t n = t.level_offset[l]; n < t.level_offset[l + 1]; ++n) {
      if (t.is_leaf(n)) {
        out[n] = p2m<float>(t.points.data() + t.point_begin[n], t.point_count[n]);
        continue;
      }
      multipole<float> acc = multipole_identity<float>();
      for (std::int32_t c = t.first_child[n]; c < t.first_child[n] + t.child_count[n]; ++c) acc = m2m_merge(acc, out[c]);
      out[n] = acc;
    }
  }
  return out;
}

octree make_tree(distribution d, std::size_t n, std::uint64_t seed, const build_options& o = {}) {
  switch (d) {
    case distribution::uniform: return build_octree(generate_uniform(n, seed), o);
    case distribution::plummer: return build_octree(generate_plummer(n, seed), o);
    case distribution::clusters: return build_octree(generate_clusters(n, seed), o);
    case distribution::lattice: break;
  }
  return build_complete_octree(3, static_cast<int>(std::max<std::size_t>(1, n / 512)), seed);
}

TEST(Reference, MatchesBruteForceAtEveryNode) {
  for (distribution d : {distribution::uniform, distribution::plummer, distribution::clusters, distribution::lattice}) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1001}, std::size_t{20000}}) {
      for (std::uint64_t seed : {1u, 2u, 3u}) {
        const octree t = make_tree(d, n, seed, {8, 21});
        const auto ref = reference_upward_pass(t);
        const auto brute = brute_force_moments(t);
        const comparison c = compare_payloads<double>(t, ref, brute);
        EXPECT_TRUE(c.within_tolerance) << to_string(d) << " n=" << n << " seed=" << seed << ": " << c.summary();
        // Double is far inside its bound: the bound is a worst case.
        EXPECT_LT(c.mass.worst, 1e-13);
        EXPECT_LT(c.com.worst, 1e-13);
        EXPECT_LT(c.m2.worst, 1e-12);
        EXPECT_EQ(c.bbox.worst, 0.0);
      }
    }
  }
}

TEST(Reference, RootEqualsAllPointsOnLargeSets) {
  for (distribution d : {distribution::uniform, distribution::plummer, distribution::clusters}) {
    const octree t = make_tree(d, 400000, 7);
    const auto ref = reference_upward_pass(t);
    const auto all = p2m<double>(t.points.data(), static_cast<std::int32_t>(t.points.size()));
    EXPECT_EQ(ref[0].count, 400000u);
    EXPECT_NEAR(ref[0].mass, all.mass, 1e-12);
    EXPECT_NEAR(ref[0].mass, 1.0, 1e-6);
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(ref[0].com[i], all.com[i], 1e-12);
      EXPECT_EQ(ref[0].lo[i], all.lo[i]);
      EXPECT_EQ(ref[0].hi[i], all.hi[i]);
    }
    for (int k = 0; k < 6; ++k) EXPECT_NEAR(ref[0].m2[k], all.m2[k], 1e-10 * std::max(1.0, std::abs(all.m2[k])));
  }
}

TEST(Reference, EmptyTreeIsTheIdentity) {
  const octree t = build_octree({});
  const auto ref = reference_upward_pass(t);
  ASSERT_EQ(ref.size(), 1u);
  EXPECT_EQ(ref[0].count, 0u);
  EXPECT_EQ(ref[0].mass, 0.0);
  const std::vector<multipole<float>> computed{multipole_identity<float>()};
  EXPECT_TRUE(compare_payloads<float>(t, computed, ref).within_tolerance);
}

TEST(Reference, FloatPassIsWithinTheStatedBounds) {
  struct {
    octree tree;
    const char* name;
  } cases[] = {{build_complete_octree(5, 8, 1), "complete depth 5"},
               {make_tree(distribution::plummer, 300000, 2, {32, 21}), "plummer 300k"},
               {make_tree(distribution::clusters, 300000, 3, {16, 21}), "clusters 300k"},
               {make_tree(distribution::uniform, 300000, 4, {1, 21}), "uniform 300k, leaf 1"}};
  for (const auto& c : cases) {
    const auto ref = reference_upward_pass(c.tree);
    const auto computed = float_upward_pass(c.tree);
    const comparison r = compare_payloads<float>(c.tree, computed, ref);
    EXPECT_TRUE(r.within_tolerance) << c.name << ": " << r.summary();
    EXPECT_EQ(r.bbox.worst, 0.0) << c.name;
    std::printf("%s: %s\n", c.name, r.summary().c_str());
  }
}

// ------------------------------------------------------------- corruption is caught -------------

class Corrupted : public ::testing::Test {
 protected:
  octree t = build_octree(generate_plummer(50000, 5), {16, 21});
  std::vector<multipole<double>> ref = reference_upward_pass(t);
  std::vector<multipole<float>> computed = float_upward_pass(t);
  std::int32_t victim = t.level_offset[std::min(3, t.depth)] + 1;  // an internal-ish node

  comparison compare() { return compare_payloads<float>(t, computed, ref); }
};

TEST_F(Corrupted, CleanPassIsAccepted) { EXPECT_TRUE(compare().within_tolerance) << compare().summary(); }

TEST_F(Corrupted, CountOffByOne) {
  computed[victim].count += 1;
  const comparison c = compare();
  EXPECT_FALSE(c.counts_match);
  EXPECT_EQ(c.first_count_mismatch, victim);
  EXPECT_FALSE(c.within_tolerance);
}

TEST_F(Corrupted, MassRelativeError) {
  computed[victim].mass *= 1.001f;
  const comparison c = compare();
  EXPECT_FALSE(c.mass.within());
  EXPECT_EQ(c.mass.node, victim);
  EXPECT_NEAR(c.mass.worst, 1e-3, 1e-5);
  EXPECT_FALSE(c.within_tolerance);
  EXPECT_TRUE(c.counts_match);
}

TEST_F(Corrupted, ComShiftedByAPercentOfTheCell) {
  const double edge = t.bounds[victim].hi[0] - t.bounds[victim].lo[0];
  computed[victim].com[1] += static_cast<float>(0.01 * edge);
  const comparison c = compare();
  EXPECT_FALSE(c.com.within()) << c.summary();
  EXPECT_EQ(c.com.node, victim);
  EXPECT_FALSE(c.within_tolerance);
}

TEST_F(Corrupted, SecondMomentLostAChild) {
  // A merge that forgot one child: count and mass also differ, m2 too.
  const std::int32_t parent = 0;
  const std::int32_t last = t.first_child[parent] + t.child_count[parent] - 1;
  multipole<float> acc = multipole_identity<float>();
  for (std::int32_t ch = t.first_child[parent]; ch < last; ++ch) acc = m2m_merge(acc, computed[ch]);
  computed[parent] = acc;
  const comparison c = compare();
  EXPECT_FALSE(c.counts_match);
  EXPECT_FALSE(c.mass.within());
  EXPECT_FALSE(c.m2.within());
}

TEST_F(Corrupted, SecondMomentOnly) {
  // 1 % of the normalisation m L^2 (reference.hpp), L = edge + largest |coordinate| of the cell.
  const box& b = t.bounds[victim];
  double magnitude = 0;
  for (int a = 0; a < 3; ++a) magnitude = std::max({magnitude, std::abs(b.lo[a]), std::abs(b.hi[a])});
  const double scale = (b.hi[0] - b.lo[0]) + magnitude;
  computed[victim].m2[4] += static_cast<float>(0.01 * ref[victim].mass * scale * scale);
  const comparison c = compare();
  EXPECT_FALSE(c.m2.within()) << c.summary();
  EXPECT_EQ(c.m2.node, victim);
}

TEST_F(Corrupted, BoundingBox) {
  computed[victim].hi[2] = std::nextafter(computed[victim].hi[2], 100.0f);
  const comparison c = compare();
  EXPECT_FALSE(c.bbox.within());
  EXPECT_EQ(c.bbox.node, victim);
}

TEST_F(Corrupted, NaNIsNeverWithin) {
  computed[victim].com[0] = std::numeric_limits<float>::quiet_NaN();
  computed[victim + 1].m2[0] = std::numeric_limits<float>::quiet_NaN();
  computed[victim + 2].mass = std::numeric_limits<float>::quiet_NaN();
  const comparison c = compare();
  EXPECT_TRUE(std::isinf(c.com.worst));
  EXPECT_TRUE(std::isinf(c.m2.worst));
  EXPECT_TRUE(std::isinf(c.mass.worst));
  EXPECT_FALSE(c.within_tolerance);
  EXPECT_NE(c.summary().find("NOT within tolerance"), std::string::npos) << c.summary();
}

TEST_F(Corrupted, SizeMismatchThrows) {
  computed.pop_back();
  EXPECT_THROW(compare(), std::invalid_argument);
}

}  // namespace
}  // namespace canopy::trees
