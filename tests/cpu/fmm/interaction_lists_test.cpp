// SPDX-License-Identifier: Apache-2.0
// The dual tree traversal's lists: every (target point, source point) pair covered exactly once,
// every M2L pair well separated, P2P only between leaves, CSR arrays well formed, the geometry's
// centres and radii right; over Plummer, uniform, clustered and lattice trees and the edge cases.
#include <canopy/fmm/interaction_lists.hpp>
#include <canopy/trees/generators.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace cf = canopy::fmm;
namespace ct = canopy::trees;

void expect_csr(const std::vector<std::int32_t>& offset, const std::vector<std::int32_t>& source, std::int32_t nodes) {
  ASSERT_EQ(offset.size(), static_cast<std::size_t>(nodes) + 1);
  EXPECT_EQ(offset.front(), 0);
  EXPECT_EQ(offset.back(), static_cast<std::int32_t>(source.size()));
  for (std::size_t i = 1; i < offset.size(); ++i) EXPECT_LE(offset[i - 1], offset[i]);
  for (const std::int32_t s : source) {
    EXPECT_GE(s, 0);
    EXPECT_LT(s, nodes);
  }
}

// For every leaf, how often each point is a source of its points: through an M2L of the leaf or
// an ancestor, or a P2P of the leaf. Exactly once each, the leaf's own points included (P2P skips
// the point itself, not its leaf).
void expect_exact_cover(const ct::octree& tree, const cf::interaction_lists& l) {
  const std::size_t n = tree.points.size();
  std::vector<int> count(n);
  for (const std::int32_t leaf : tree.leaves) {
    std::fill(count.begin(), count.end(), 0);
    const auto add = [&](std::int32_t node) {
      const auto b = static_cast<std::size_t>(tree.point_begin[static_cast<std::size_t>(node)]);
      for (std::size_t j = b; j < b + static_cast<std::size_t>(tree.point_count[static_cast<std::size_t>(node)]); ++j) ++count[j];
    };
    for (std::int32_t a = leaf; a >= 0; a = tree.parent[static_cast<std::size_t>(a)])
      for (std::int32_t k = l.m2l_offset[static_cast<std::size_t>(a)]; k < l.m2l_offset[static_cast<std::size_t>(a) + 1]; ++k)
        add(l.m2l_source[static_cast<std::size_t>(k)]);
    for (std::int32_t k = l.p2p_offset[static_cast<std::size_t>(leaf)]; k < l.p2p_offset[static_cast<std::size_t>(leaf) + 1]; ++k)
      add(l.p2p_source[static_cast<std::size_t>(k)]);
    for (std::size_t j = 0; j < n; ++j) ASSERT_EQ(count[j], 1) << "leaf " << leaf << ", point " << j;
  }
}

void check_lists(const ct::octree& tree, double theta) {
  const auto g = cf::compute_cell_geometry(tree);
  const cf::interaction_lists l = cf::build_interaction_lists(tree, g, theta);
  const std::int32_t nodes = tree.node_count();
  expect_csr(l.m2l_offset, l.m2l_source, nodes);
  expect_csr(l.p2p_offset, l.p2p_source, nodes);
  for (std::int32_t t = 0; t < nodes; ++t) {
    const auto ti = static_cast<std::size_t>(t);
    for (std::int32_t k = l.m2l_offset[ti]; k < l.m2l_offset[ti + 1]; ++k) {
      const std::int32_t s = l.m2l_source[static_cast<std::size_t>(k)];
      EXPECT_NE(s, t);
      // The criterion written out here, not the library's well_separated.
      const cf::cell_geometry& a = g[ti];
      const cf::cell_geometry& b = g[static_cast<std::size_t>(s)];
      const double d = std::hypot(a.center[0] - b.center[0], a.center[1] - b.center[1], a.center[2] - b.center[2]);
      EXPECT_LT(a.radius + b.radius, theta * d * (1 + 1e-12)) << t << " <- " << s;
    }
    if (!tree.is_leaf(t)) {
      EXPECT_EQ(l.p2p_offset[ti], l.p2p_offset[ti + 1]) << "P2P list of inner node " << t;
    }
    for (std::int32_t k = l.p2p_offset[ti]; k < l.p2p_offset[ti + 1]; ++k)
      EXPECT_TRUE(tree.is_leaf(l.p2p_source[static_cast<std::size_t>(k)]));
  }
  expect_exact_cover(tree, l);
}

TEST(FmmInteractionLists, CoverEveryPairOnceOverDistributionsAndThetas) {
  for (const double theta : {0.3, 0.5, 0.7, 1.0}) {
    check_lists(ct::build_octree(ct::generate_plummer(3000, 1), {16, 21}), theta);
    check_lists(ct::build_octree(ct::generate_uniform(2000, 2), {8, 21}), theta);
    check_lists(ct::build_octree(ct::generate_clusters(2000, 3, 5), {32, 21}), theta);
    check_lists(ct::build_complete_octree(3, 2, 4), theta);
  }
}

TEST(FmmInteractionLists, EdgeCases) {
  // Empty input (one empty leaf), a single point, every point in one leaf, coincident points
  // (one leaf on max_depth larger than max_leaf), a tree cut at depth 1.
  check_lists(ct::build_octree(std::vector<ct::point>{}), 0.5);
  check_lists(ct::build_octree(std::vector<ct::point>{{0.5f, 0.5f, 0.5f, 1.0f}}), 0.5);
  check_lists(ct::build_octree(ct::generate_uniform(20, 5), {32, 21}), 0.5);
  std::vector<ct::point> same(40, ct::point{0.25f, -1.0f, 3.0f, 0.5f});
  const auto more = ct::generate_uniform(200, 6);
  same.insert(same.end(), more.begin(), more.end());
  check_lists(ct::build_octree(same, {4, 21}), 0.5);
  check_lists(ct::build_octree(ct::generate_plummer(1000, 7), {8, 1}), 0.5);
}

TEST(FmmInteractionLists, SmallerThetaOpensMoreCells) {
  const ct::octree tree = ct::build_octree(ct::generate_plummer(4000, 8), {16, 21});
  const auto g = cf::compute_cell_geometry(tree);
  std::size_t previous_near = 0;
  for (const double theta : {1.0, 0.7, 0.5, 0.3}) {
    const auto l = cf::build_interaction_lists(tree, g, theta);
    // The near field (P2P pairs of points) can only grow as the criterion tightens.
    std::size_t near = 0;
    for (const std::int32_t leaf : tree.leaves)
      for (std::int32_t k = l.p2p_offset[static_cast<std::size_t>(leaf)]; k < l.p2p_offset[static_cast<std::size_t>(leaf) + 1]; ++k)
        near += static_cast<std::size_t>(tree.point_count[static_cast<std::size_t>(leaf)]) *
                static_cast<std::size_t>(tree.point_count[static_cast<std::size_t>(l.p2p_source[static_cast<std::size_t>(k)])]);
    EXPECT_GE(near, previous_near) << theta;
    previous_near = near;
  }
}

TEST(FmmInteractionLists, GeometryIsCentreOfMassAndEnclosingRadius) {
  const ct::octree tree = ct::build_octree(ct::generate_clusters(1500, 9, 3), {16, 21});
  const auto g = cf::compute_cell_geometry(tree);
  ASSERT_EQ(g.size(), static_cast<std::size_t>(tree.node_count()));
  for (std::int32_t n = 0; n < tree.node_count(); ++n) {
    const auto i = static_cast<std::size_t>(n);
    EXPECT_DOUBLE_EQ(g[i].scale, 0.5 * (tree.bounds[i].hi[0] - tree.bounds[i].lo[0]));
    double m = 0, c[3] = {0, 0, 0}, r = 0;
    for (std::int32_t j = tree.point_begin[i]; j < tree.point_begin[i] + tree.point_count[i]; ++j) {
      const ct::point& p = tree.points[static_cast<std::size_t>(j)];
      m += p.m;
      c[0] += double(p.m) * p.x;
      c[1] += double(p.m) * p.y;
      c[2] += double(p.m) * p.z;
    }
    for (int a = 0; a < 3; ++a) EXPECT_NEAR(g[i].center[a], c[a] / m, 1e-12);
    for (std::int32_t j = tree.point_begin[i]; j < tree.point_begin[i] + tree.point_count[i]; ++j) {
      const ct::point& p = tree.points[static_cast<std::size_t>(j)];
      const double dx = p.x - g[i].center[0], dy = p.y - g[i].center[1], dz = p.z - g[i].center[2];
      r = std::max(r, std::sqrt(dx * dx + dy * dy + dz * dz));
    }
    EXPECT_DOUBLE_EQ(g[i].radius, r);
    // Every point inside the cell, so the radius is at most the cell's diagonal.
    EXPECT_LE(g[i].radius, 2 * std::sqrt(3.0) * g[i].scale * (1 + 1e-9));
  }
}

TEST(FmmInteractionLists, RejectsThetaOutsideTheConvergentRangeAndForeignGeometry) {
  const ct::octree tree = ct::build_octree(ct::generate_uniform(100, 10), {8, 21});
  const auto g = cf::compute_cell_geometry(tree);
  for (const double theta : {0.0, -0.5, 1.01, std::nan("")})
    EXPECT_THROW(cf::build_interaction_lists(tree, g, theta), std::invalid_argument) << theta;
  const std::vector<cf::cell_geometry> fewer(g.begin(), g.end() - 1);
  EXPECT_THROW(cf::build_interaction_lists(tree, fewer, 0.5), std::invalid_argument);
}

// sort_sources is the lists' canonical form (the device build's order): each row sorted, the rows
// and their contents unchanged as sets, the offsets untouched, and sorting twice changes nothing.
TEST(FmmInteractionLists, SortSourcesSortsEachRowAndKeepsItsSet) {
  const ct::octree tree = ct::build_octree(ct::generate_plummer(3000, 12), {16, 21});
  const auto g = cf::compute_cell_geometry(tree);
  const cf::interaction_lists original = cf::build_interaction_lists(tree, g, 0.5);
  cf::interaction_lists sorted = original;
  cf::sort_sources(sorted);
  EXPECT_EQ(sorted.m2l_offset, original.m2l_offset);
  EXPECT_EQ(sorted.p2p_offset, original.p2p_offset);
  bool some_row_was_unsorted = false;
  const auto check = [&](const std::vector<std::int32_t>& offset, const std::vector<std::int32_t>& before,
                         const std::vector<std::int32_t>& after) {
    ASSERT_EQ(before.size(), after.size());
    for (std::size_t t = 0; t + 1 < offset.size(); ++t) {
      std::vector<std::int32_t> a(before.begin() + offset[t], before.begin() + offset[t + 1]);
      const std::vector<std::int32_t> b(after.begin() + offset[t], after.begin() + offset[t + 1]);
      EXPECT_TRUE(std::is_sorted(b.begin(), b.end())) << "row " << t;
      EXPECT_TRUE(std::adjacent_find(b.begin(), b.end()) == b.end()) << "row " << t << " lists a source twice";
      some_row_was_unsorted = some_row_was_unsorted || !std::is_sorted(a.begin(), a.end());
      std::sort(a.begin(), a.end());
      EXPECT_EQ(a, b) << "row " << t;
    }
  };
  check(original.m2l_offset, original.m2l_source, sorted.m2l_source);
  check(original.p2p_offset, original.p2p_source, sorted.p2p_source);
  EXPECT_TRUE(some_row_was_unsorted) << "the traversal's order should differ from the sorted one somewhere";
  expect_exact_cover(tree, sorted);
  cf::interaction_lists twice = sorted;
  cf::sort_sources(twice);
  EXPECT_EQ(twice.m2l_source, sorted.m2l_source);
  EXPECT_EQ(twice.p2p_source, sorted.p2p_source);
  cf::interaction_lists empty;
  cf::sort_sources(empty);  // no rows at all: nothing to do
  EXPECT_TRUE(empty.m2l_source.empty());
}

// The centre's mass sums go up the tree (children in order, a leaf over its points): exactly the
// sums a caller gets by adding the children's sums, and bit for bit the same for every leaf as the
// point loop, which is what the device build reproduces.
TEST(FmmInteractionLists, CentresSumUpTheTreeInChildOrder) {
  const ct::octree tree = ct::build_octree(ct::generate_clusters(5000, 13), {8, 21});
  const auto g = cf::compute_cell_geometry(tree);
  std::vector<cf::detail::mass_sums> sums(g.size(), cf::detail::mass_sums{0, 0, 0, 0});
  for (std::int32_t n = tree.node_count() - 1; n >= 0; --n) {
    const auto i = static_cast<std::size_t>(n);
    if (tree.is_leaf(n)) {
      for (std::int32_t j = tree.point_begin[i]; j < tree.point_begin[i] + tree.point_count[i]; ++j)
        cf::detail::add_point(sums[i], tree.points[static_cast<std::size_t>(j)]);
    } else {
      for (std::int32_t c = tree.first_child[i]; c < tree.first_child[i] + tree.child_count[i]; ++c)
        cf::detail::add_sums(sums[i], sums[static_cast<std::size_t>(c)]);
    }
    for (int a = 0; a < 3; ++a) {
      const double expect = (a == 0 ? sums[i].x : a == 1 ? sums[i].y : sums[i].z) / sums[i].m;
      EXPECT_EQ(g[i].center[a], expect) << "node " << n;
    }
  }
}

}  // namespace
