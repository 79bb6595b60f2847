// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/generators.hpp>
#include <canopy/trees/morton.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/threads.hpp>

#include "test_support.hpp"

#include <cmath>
#include <limits>
#include <string>

namespace canopy::trees {
namespace {

using testing::expect_throw;
using testing::same_bits;
using testing::sorted_tuples;

std::vector<point> make_points(distribution d, std::size_t n, std::uint64_t seed) {
  switch (d) {
    case distribution::uniform: return generate_uniform(n, seed);
    case distribution::plummer: return generate_plummer(n, seed);
    case distribution::clusters: return generate_clusters(n, seed);
    case distribution::lattice: break;
  }
  // The lattice has 8^depth * per_leaf points: take the nearest depth with 1..8 per leaf.
  int depth = 0;
  while ((std::size_t{1} << (3 * (depth + 1))) <= n) ++depth;
  return generate_lattice(depth, static_cast<int>(std::max<std::size_t>(1, n >> (3 * depth))), seed);
}

// The split rule: internal nodes are above max_leaf and below max_depth, leaves are not both.
void expect_leaf_policy(const octree& t, const build_options& o) {
  for (std::int32_t n = 0; n < t.node_count(); ++n) {
    if (t.is_leaf(n)) {
      EXPECT_TRUE(t.point_count[n] <= o.max_leaf || t.level[n] == o.max_depth) << "leaf " << n << " should split";
    } else {
      EXPECT_TRUE(t.point_count[n] > o.max_leaf && t.level[n] < o.max_depth) << "node " << n << " should be a leaf";
    }
  }
}

void expect_sorted_by_morton(const octree& t) {
  const std::vector<std::uint64_t> codes = morton_codes(t.points, t.bounds[0]);
  for (std::size_t i = 1; i < codes.size(); ++i) ASSERT_LE(codes[i - 1], codes[i]) << "point " << i;
}

void expect_same_tree(const octree& a, const octree& b) {
  EXPECT_EQ(a.depth, b.depth);
  EXPECT_EQ(a.level_offset, b.level_offset);
  EXPECT_EQ(a.parent, b.parent);
  EXPECT_EQ(a.first_child, b.first_child);
  EXPECT_EQ(a.child_count, b.child_count);
  EXPECT_EQ(a.point_begin, b.point_begin);
  EXPECT_EQ(a.point_count, b.point_count);
  EXPECT_EQ(a.level, b.level);
  EXPECT_EQ(a.leaves, b.leaves);
  EXPECT_TRUE(same_bits(a.points, b.points));
  ASSERT_EQ(a.bounds.size(), b.bounds.size());
  EXPECT_EQ(std::memcmp(a.bounds.data(), b.bounds.data(), a.bounds.size() * sizeof(box)), 0);
}

// ------------------------------------------------------------- adaptive, parameterised ----------

struct adaptive_case {
  distribution dist;
  std::size_t n;
  std::uint64_t seed;
  build_options options;
};

std::string case_name(const ::testing::TestParamInfo<adaptive_case>& info) {
  const adaptive_case& c = info.param;
  return std::string(to_string(c.dist)) + "_n" + std::to_string(c.n) + "_seed" + std::to_string(c.seed) + "_leaf" +
         std::to_string(c.options.max_leaf) + "_depth" + std::to_string(c.options.max_depth);
}

class AdaptiveOctree : public ::testing::TestWithParam<adaptive_case> {};

TEST_P(AdaptiveOctree, SatisfiesInvariantsAndSplitRule) {
  const adaptive_case& c = GetParam();
  const std::vector<point> pts = make_points(c.dist, c.n, c.seed);
  const octree t = build_octree(pts, c.options);
  ASSERT_NO_THROW(check_invariants(t));
  expect_leaf_policy(t, c.options);
  EXPECT_EQ(sorted_tuples(t.points), sorted_tuples(pts));  // a permutation of the input
  expect_sorted_by_morton(t);
  EXPECT_LE(t.depth, c.options.max_depth);
  // The root cube contains every point strictly inside (padding).
  for (const point& p : pts) {
    const float v[3] = {p.x, p.y, p.z};
    for (int a = 0; a < 3; ++a) {
      ASSERT_GE(v[a], t.bounds[0].lo[a]);
      ASSERT_LT(v[a], t.bounds[0].hi[a]);
    }
  }
}

std::vector<adaptive_case> adaptive_cases() {
  std::vector<adaptive_case> cases;
  for (distribution d : {distribution::uniform, distribution::plummer, distribution::clusters, distribution::lattice}) {
    for (std::size_t n : {std::size_t{1}, std::size_t{1001}, std::size_t{200000}}) {
      for (std::uint64_t seed : {1u, 2u, 3u}) cases.push_back({d, n, seed, {}});
    }
    cases.push_back({d, 5000, 4, {1, 21}});
    cases.push_back({d, 5000, 4, {8, 3}});
    cases.push_back({d, 5000, 4, {100, 21}});
    cases.push_back({d, 5000, 4, {16, 0}});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Distributions, AdaptiveOctree, ::testing::ValuesIn(adaptive_cases()), case_name);

// ------------------------------------------------------------- adaptive, special cases ----------

TEST(Octree, EmptyInputGivesOneEmptyRoot) {
  const octree t = build_octree({});
  ASSERT_NO_THROW(check_invariants(t));
  EXPECT_EQ(t.node_count(), 1);
  EXPECT_EQ(t.depth, 0);
  EXPECT_EQ(t.level_offset, (std::vector<std::int32_t>{0, 1}));
  EXPECT_TRUE(t.is_leaf(0));
  EXPECT_EQ(t.point_count[0], 0);
  EXPECT_EQ(t.leaves, std::vector<std::int32_t>{0});
  EXPECT_TRUE(t.points.empty());
}

TEST(Octree, SinglePointIsARootLeaf) {
  const std::vector<point> pts{{3.0f, -2.0f, 1e6f, 0.5f}};
  const octree t = build_octree(pts);
  ASSERT_NO_THROW(check_invariants(t));
  EXPECT_EQ(t.node_count(), 1);
  EXPECT_EQ(t.bounds[0].hi[0] - t.bounds[0].lo[0], 1.0);  // coincident points get a unit cube
}

TEST(Octree, CoincidentPointsStopAtMaxDepth) {
  const std::vector<point> pts(1000, point{0.25f, 0.5f, 0.75f, 1.0f});
  for (int max_depth : {0, 5, 21}) {
    const octree t = build_octree(pts, {32, max_depth});
    ASSERT_NO_THROW(check_invariants(t));
    EXPECT_EQ(t.depth, max_depth);
    EXPECT_EQ(t.node_count(), max_depth + 1);  // a chain of single children
    ASSERT_EQ(t.leaves.size(), 1u);
    EXPECT_EQ(t.level[t.leaves[0]], max_depth);
    EXPECT_EQ(t.point_count[t.leaves[0]], 1000);
  }
}

TEST(Octree, TwoCoincidentClumpsSplitOnceThenChain) {
  std::vector<point> pts(100, point{0.0f, 0.0f, 0.0f, 1.0f});
  pts.resize(200, point{1.0f, 1.0f, 1.0f, 1.0f});
  const octree t = build_octree(pts, {10, 21});
  ASSERT_NO_THROW(check_invariants(t));
  EXPECT_EQ(t.child_count[0], 2);
  EXPECT_EQ(t.leaves.size(), 2u);
  EXPECT_EQ(t.depth, 21);
  EXPECT_EQ(t.node_count(), 1 + 2 * 21);
}

TEST(Octree, FarFromOriginAndTiny) {
  // Extent 1e-3 around 1e4: cells get far below float spacing long before level 21; the tree must
  // still terminate (coincident floats at max_depth) and keep its invariants.
  std::vector<point> pts = generate_uniform(20000, 5);
  for (point& p : pts) p = {1e4f + p.x * 1e-3f, -1e4f + p.y * 1e-3f, p.z * 1e-3f, p.m};
  const octree t = build_octree(pts, {4, 21});
  ASSERT_NO_THROW(check_invariants(t));
  expect_leaf_policy(t, {4, 21});
}

TEST(Octree, MaxLeafOneSeparatesDistinctPoints) {
  const std::vector<point> pts = generate_uniform(3000, 8);
  const octree t = build_octree(pts, {1, 21});
  ASSERT_NO_THROW(check_invariants(t));
  for (std::int32_t leaf : t.leaves) EXPECT_EQ(t.point_count[leaf], 1);
}

TEST(Octree, StableForEqualCodes) {
  // Points in one finest cell keep their input order (the sort is stable): tag them by mass.
  std::vector<point> pts;
  for (int i = 0; i < 50; ++i) pts.push_back({0.5f, 0.5f, 0.5f, float(i)});
  pts.push_back({0.0f, 0.0f, 0.0f, 100.0f});
  const octree t = build_octree(pts, {1, 21});
  std::vector<float> masses;
  for (const point& p : t.points) masses.push_back(p.m);
  EXPECT_EQ(masses.front(), 100.0f);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(masses[i + 1], float(i));
}

TEST(Octree, ResultDoesNotDependOnThreadCount) {
  struct guard {
    ~guard() { set_host_threads(0); }
  } restore;
  const std::vector<point> pts = generate_plummer(300000, 12);
  set_host_threads(1);
  const octree one = build_octree(pts);
  for (unsigned threads : {2u, 5u}) {
    set_host_threads(threads);
    expect_same_tree(one, build_octree(pts));
  }
}

TEST(Octree, RejectsBadOptions) {
  const std::vector<point> pts = generate_uniform(10, 1);
  expect_throw<input_error>([&] { build_octree(pts, {0, 21}); }, {"build_octree: max_leaf", "at least 1"});
  expect_throw<input_error>([&] { build_octree(pts, {32, 22}); }, {"build_octree: max_depth", "22"});
  expect_throw<input_error>([&] { build_octree(pts, {32, -1}); }, {"build_octree: max_depth", "-1"});
}

TEST(Octree, RejectsNonFinitePoints) {
  std::vector<point> pts = generate_uniform(100000, 1);
  pts[77777].y = std::numeric_limits<float>::infinity();
  pts[88888].x = std::numeric_limits<float>::quiet_NaN();
  expect_throw<input_error>([&] { build_octree(pts); }, {"build_octree", "point 77777"});
  pts[77777].y = 0.5f;
  expect_throw<input_error>([&] { build_octree(pts); }, {"point 88888"});
  pts[88888].x = 0.5f;
  pts[5].m = std::numeric_limits<float>::quiet_NaN();
  expect_throw<input_error>([&] { build_octree(pts); }, {"point 5"});
}

// ------------------------------------------------------------- complete trees -------------------

TEST(CompleteOctree, ClosedFormLayoutForDepthsZeroToFour) {
  for (int depth = 0; depth <= 4; ++depth) {
    for (int per_leaf : {1, 3}) {
      const octree t = build_complete_octree(depth, per_leaf, 99);
      ASSERT_NO_THROW(check_invariants(t)) << depth;
      EXPECT_EQ(t.depth, depth);
      std::int32_t width = 1, offset = 0;
      for (int l = 0; l <= depth; ++l, offset += width, width *= 8) {
        EXPECT_EQ(t.level_offset[l], offset);
        for (std::int32_t n = offset; n < offset + width; ++n) {
          EXPECT_EQ(t.child_count[n], l < depth ? 8 : 0);
          EXPECT_EQ(t.point_count[n], per_leaf << (3 * (depth - l)));
          const double edge = std::ldexp(1.0, -l);
          EXPECT_EQ(t.bounds[n].hi[0] - t.bounds[n].lo[0], edge);
        }
      }
      EXPECT_EQ(t.node_count(), offset);
      EXPECT_EQ(t.leaves.size(), std::size_t{1} << (3 * depth));
      EXPECT_TRUE(same_bits(t.points, generate_lattice(depth, per_leaf, 99)));
      EXPECT_EQ(t.bounds[0].lo[0], 0.0);
      EXPECT_EQ(t.bounds[0].hi[2], 1.0);
    }
  }
}

TEST(CompleteOctree, AdaptiveBuildOfItsPointsIsValid) {
  // The adaptive builder pads its cube, so its cells differ from the lattice's; it must still
  // accept the lattice and, with max_leaf 1, give each of these distinct points its own leaf.
  const octree complete = build_complete_octree(3, 1, 4);
  const octree adaptive = build_octree(complete.points, {1, 21});
  ASSERT_NO_THROW(check_invariants(adaptive));
  EXPECT_EQ(sorted_tuples(adaptive.points), sorted_tuples(complete.points));
  EXPECT_EQ(adaptive.leaves.size(), complete.leaves.size());
}

TEST(CompleteOctree, LargerTreeIsThreadCountIndependent) {
  struct guard {
    ~guard() { set_host_threads(0); }
  } restore;
  set_host_threads(1);
  const octree one = build_complete_octree(6, 2, 3);
  ASSERT_NO_THROW(check_invariants(one));
  set_host_threads(3);
  expect_same_tree(one, build_complete_octree(6, 2, 3));
}

TEST(CompleteOctree, RejectsBadArguments) {
  expect_throw<input_error>([] { build_complete_octree(-1, 8, 0); }, {"build_complete_octree: depth"});
  expect_throw<input_error>([] { build_complete_octree(22, 8, 0); }, {"build_complete_octree: depth", "22"});
  expect_throw<input_error>([] { build_complete_octree(3, 0, 0); }, {"build_complete_octree: per_leaf"});
  expect_throw<input_error>([] { build_complete_octree(11, 1, 0); }, {"build_complete_octree", "2^31 - 1"});
}

// ------------------------------------------------------------- check_invariants catches ---------

class BrokenTree : public ::testing::Test {
 protected:
  octree t = build_octree(generate_plummer(5000, 2), {8, 21});
  void expect_caught(const std::string& fragment) {
    try {
      check_invariants(t);
      ADD_FAILURE() << "not caught: " << fragment;
    } catch (const invariant_error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  }
};

TEST_F(BrokenTree, OriginalIsValid) { EXPECT_NO_THROW(check_invariants(t)); }

TEST_F(BrokenTree, WrongParent) {
  const std::int32_t n = t.level_offset[2];
  t.parent[n] = t.parent[n] == 0 ? 1 : 0;
  expect_caught("parent");
}

TEST_F(BrokenTree, SiblingsSwapped) {
  const std::int32_t a = t.first_child[0];
  ASSERT_GE(t.child_count[0], 2);
  std::swap(t.bounds[a], t.bounds[a + 1]);
  expect_caught("octant order");
}

TEST_F(BrokenTree, PointOutsideLeaf) {
  const std::int32_t leaf = t.leaves[t.leaves.size() / 2];
  t.points[t.point_begin[leaf]].x += 3.0f;
  expect_caught("outside the leaf's cell");
}

TEST_F(BrokenTree, LeavesOutOfOrder) {
  std::swap(t.leaves[3], t.leaves[4]);
  expect_caught("Morton order");
}

TEST_F(BrokenTree, MissingLeaf) {
  t.leaves.pop_back();
  expect_caught("leaves lists");
}

TEST_F(BrokenTree, ChildRangesDoNotTile) {
  const std::int32_t c = t.first_child[0];
  t.point_count[c] -= 1;
  expect_caught("tile");
}

TEST_F(BrokenTree, WrongLevel) {
  t.level[t.node_count() - 1] = 0;
  expect_caught("level");
}

TEST_F(BrokenTree, DeepestLevelEmpty) {
  t.level_offset.push_back(t.level_offset.back());
  t.depth += 1;
  expect_caught("empty");
}

TEST_F(BrokenTree, CellNotACube) {
  t.bounds[t.level_offset[1]].hi[1] += 0.5;
  expect_caught("cube");
}

TEST_F(BrokenTree, LeafLosesItsPoints) {
  const std::int32_t leaf = t.leaves.back();
  t.point_count[leaf] = 0;
  expect_caught("add up");
}

}  // namespace
}  // namespace canopy::trees
