// SPDX-License-Identifier: Apache-2.0
// octree_steps.hpp, the portable core of the GPU builder, driven over host arrays the way the
// builder's kernels drive it (tests/cpu: runs without a GPU):
//  * the step functions against the host builder's original formulas (std::ldexp, std::max,
//    std::abs, std::isfinite), bit for bit;
//  * an emulation of src/device_octree_builder.cu's pipeline (extents merged in scrambled order
//    as a parallel reduce would, codes, a stable sort, then the flat build: window levels, their
//    segment-wise prefix and suffix maxima (checked against the brute-force sliding maximum),
//    spans, leaf starts, the level histogram, (level, leaf start) pairs sorted stably by level
//    and their inverse, every node's links from flat_node in scrambled order, parents written by
//    them) compared node for node with
//    build_octree over many inputs: every array, the permutation, and the rejected-point error.
#include <canopy/trees/errors.hpp>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/morton.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/octree_steps.hpp>

#include "edge_case_sets.hpp"
#include "test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace canopy::trees {
namespace {

using testing::same_bits;

// ------------------------------------------------------------- the host's original formulas -----

// build_octree's cell and cube arithmetic as it was written before it moved to octree_steps.hpp.
box original_cell_box(const box& cube, std::uint64_t prefix, int level) {
  const double edge = std::ldexp(cube.hi[0] - cube.lo[0], -level);
  const morton_cell c = morton_decode(prefix);
  const double idx[3] = {static_cast<double>(c.x), static_cast<double>(c.y), static_cast<double>(c.z)};
  box b;
  for (int a = 0; a < 3; ++a) {
    b.lo[a] = cube.lo[a] + idx[a] * edge;
    b.hi[a] = cube.lo[a] + (idx[a] + 1.0) * edge;
  }
  return b;
}

box original_bounding_cube(const double lo[3], const double hi[3]) {
  double edge = 0.0;
  for (int a = 0; a < 3; ++a) edge = std::max(edge, hi[a] - lo[a]);
  edge = edge > 0.0 ? edge * (1.0 + 0x1.0p-16) : 1.0;
  double magnitude = 0.0;
  for (int a = 0; a < 3; ++a) magnitude = std::max({magnitude, std::abs(lo[a]), std::abs(hi[a])});
  edge = std::max(edge, magnitude * 0x1.0p-24);
  box cube;
  for (int a = 0; a < 3; ++a) {
    const double centre = 0.5 * (lo[a] + hi[a]);
    cube.lo[a] = centre - 0.5 * edge;
    cube.hi[a] = cube.lo[a] + edge;
  }
  return cube;
}

bool original_rejected(const point& q) {
  return !std::isfinite(q.x) || !std::isfinite(q.y) || !std::isfinite(q.z) || !std::isfinite(q.m) || q.m < 0.0f ||
         std::abs(q.x) > max_coordinate_magnitude || std::abs(q.y) > max_coordinate_magnitude ||
         std::abs(q.z) > max_coordinate_magnitude;
}

bool same_box(const box& a, const box& b) { return std::memcmp(&a, &b, sizeof(box)) == 0; }

TEST(OctreeSteps, RejectedPointMatchesTheHostRule) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float limit = static_cast<float>(max_coordinate_magnitude);
  const float above = std::nextafter(limit, inf);
  const float values[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-45f, limit, -limit, above, -above, 3e38f, -3e38f,
                          std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), inf, -inf, nan};
  int rejected = 0;
  for (float x : values) {
    for (float m : values) {
      for (const point q : {point{x, 0.5f, 0.5f, m}, point{0.5f, x, 0.5f, m}, point{0.5f, 0.5f, x, m}}) {
        ASSERT_EQ(rejected_point(q.x, q.y, q.z, q.m), original_rejected(q)) << q.x << " " << q.y << " " << q.z << " " << q.m;
        rejected += original_rejected(q);
      }
    }
  }
  EXPECT_GT(rejected, 100);  // the table exercises both answers
}

TEST(OctreeSteps, CellBoxAndBoundingCubeAreTheHostFormulasBitForBit) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-60, 50);
  for (int trial = 0; trial < 20000; ++trial) {
    const double scale = std::ldexp(1.0, exponent(rng));
    double lo[3], hi[3];
    for (int a = 0; a < 3; ++a) {
      const double u = static_cast<float>(unit(rng) * scale), v = static_cast<float>(unit(rng) * scale);
      lo[a] = trial % 7 == 0 ? u : std::min(u, v);  // every 7th: a single point
      hi[a] = trial % 7 == 0 ? u : std::max(u, v);
    }
    const box cube = bounding_cube(lo, hi);
    ASSERT_TRUE(same_box(cube, original_bounding_cube(lo, hi))) << "trial " << trial;
    const int level = trial % (max_octree_depth + 1);
    const std::uint64_t code = rng() >> 1;
    const std::uint64_t prefix = morton_prefix(code, level);
    ASSERT_TRUE(same_box(cell_box(cube, prefix, level), original_cell_box(cube, prefix, level))) << "trial " << trial;
  }
  // A parallel reduce may keep either zero of a min or max that ties at 0.0 == -0.0: the cube must
  // not depend on which.
  for (int signs = 0; signs < 64; ++signs) {
    double lo[3], hi[3];
    for (int a = 0; a < 3; ++a) {
      lo[a] = (signs >> (2 * a)) & 1 ? -0.0 : 0.0;
      hi[a] = a == 1 ? 2.5 : ((signs >> (2 * a + 1)) & 1 ? -0.0 : 0.0);
    }
    const double zero_lo[3] = {0.0, 0.0, 0.0}, zero_hi[3] = {0.0, 2.5, 0.0};
    EXPECT_TRUE(same_box(bounding_cube(lo, hi), bounding_cube(zero_lo, zero_hi))) << "signs " << signs;
    for (int a = 0; a < 3; ++a) hi[a] = a == 1 ? lo[a] : hi[a];
    const double all_zero[3] = {0.0, 0.0, 0.0};
    EXPECT_TRUE(same_box(bounding_cube(lo, hi), bounding_cube(all_zero, all_zero))) << "signs " << signs;
  }
}

TEST(OctreeSteps, ExtentsMergeInAnyOrder) {
  std::vector<point> pts = generate_plummer(5000, 4);
  pts[4321].z = std::numeric_limits<float>::quiet_NaN();
  pts[1234].x = 2e15f;
  pts[777].y = -0.0f;
  std::mt19937_64 rng(11);
  point_extent serial = empty_extent();
  for (std::size_t i = 0; i < pts.size(); ++i)
    serial = merge_extents(serial, extent_of(pts[i].x, pts[i].y, pts[i].z, pts[i].m, static_cast<std::int32_t>(i)));
  EXPECT_EQ(serial.first_rejected, 1234);
  for (int trial = 0; trial < 20; ++trial) {
    // A reduce tree of random shape: random chunks, merged in random order.
    std::vector<point_extent> parts;
    for (std::size_t i = 0; i < pts.size();) {
      const std::size_t len = 1 + rng() % 300;
      point_extent e = empty_extent();
      for (std::size_t j = std::min(pts.size(), i + len); j-- > i;)
        e = merge_extents(extent_of(pts[j].x, pts[j].y, pts[j].z, pts[j].m, static_cast<std::int32_t>(j)), e);
      parts.push_back(e);
      i += len;
    }
    std::shuffle(parts.begin(), parts.end(), rng);
    while (parts.size() > 1) {
      const std::size_t k = rng() % (parts.size() - 1);
      parts[k] = merge_extents(parts[k + 1], parts[k]);
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(k) + 1);
    }
    EXPECT_EQ(std::memcmp(&parts[0], &serial, sizeof(point_extent)), 0) << "trial " << trial;
  }
}

// ------------------------------------------------------------- the GPU pipeline, emulated -------

struct emulated_build {
  octree tree;
  std::vector<std::int32_t> permutation;
};

// src/device_octree_builder.cu's steps over host arrays, each kernel a loop over its threads.
emulated_build emulate_device_build(const std::vector<point>& input, const build_options& options,
                                    std::uint64_t scramble) {
  const auto n = static_cast<std::int32_t>(input.size());
  emulated_build out;
  octree& t = out.tree;
  if (n == 0) {  // empty_tree
    t.level_offset = {0, 1};
    t.parent = {-1};
    t.first_child = {-1};
    t.child_count = {0};
    t.point_begin = {0};
    t.point_count = {0};
    t.level = {0};
    t.bounds = {box{{0.0, 0.0, 0.0}, {1.0, 1.0, 1.0}}};
    t.leaves = {0};
    return out;
  }
  // DeviceReduce: per-point extents merged in an order that depends on `scramble`.
  std::vector<point_extent> extents(input.size());
  for (std::int32_t i = 0; i < n; ++i) extents[i] = extent_of(input[i].x, input[i].y, input[i].z, input[i].m, i);
  std::mt19937_64 rng(scramble);
  std::shuffle(extents.begin(), extents.end(), rng);
  point_extent extent = empty_extent();
  for (const point_extent& e : extents) extent = rng() & 1 ? merge_extents(extent, e) : merge_extents(e, extent);
  if (extent.first_rejected != no_rejected_point) {
    const auto i = static_cast<std::size_t>(extent.first_rejected);
    throw rejected_point_error("device_octree_builder", i, input[i]);
  }
  // start_tree, compute_codes, the stable radix sort, gather_points.
  const box cube = bounding_cube(extent);
  const morton_grid grid = make_morton_grid(cube);
  std::vector<std::uint64_t> codes(input.size());
  for (std::int32_t i = 0; i < n; ++i) codes[i] = morton_code(input[i], grid);
  out.permutation.resize(input.size());
  std::iota(out.permutation.begin(), out.permutation.end(), 0);
  std::stable_sort(out.permutation.begin(), out.permutation.end(),
                   [&](std::int32_t a, std::int32_t b) { return codes[a] < codes[b]; });
  std::vector<std::uint64_t> sorted(input.size());
  t.points.resize(input.size());
  for (std::int32_t i = 0; i < n; ++i) {
    sorted[i] = codes[out.permutation[i]];
    t.points[i] = input[out.permutation[i]];
  }
  // The flat build. window_levels: P over n + window entries.
  const std::int64_t window = std::min<std::int64_t>(options.max_leaf, n), width = window + 1;
  const std::int64_t items = n + window;
  std::vector<std::uint8_t> p(static_cast<std::size_t>(items)), pre(p.size()), suf(p.size());
  for (std::int64_t t = 0; t < items; ++t) p[t] = t < window ? 0 : window_level(sorted.data(), n, t - window, window);
  // The two InclusiveScanByKey over segments of `width`: prefix maxima forwards, suffix backwards.
  for (std::int64_t t = 0; t < items; ++t) pre[t] = t % width == 0 ? p[t] : std::max(pre[t - 1], p[t]);
  for (std::int64_t t = items - 1; t >= 0; --t) {
    suf[t] = t == items - 1 || (t + 1) % width == 0 ? p[t] : std::max(suf[t + 1], p[t]);
  }
  // point_spans, with the level histogram; DeviceSelect::If of the leaf starts.
  std::vector<std::uint16_t> span(input.size());
  std::vector<std::int32_t> level_nodes(max_octree_depth + 1, 0), leaf_point;
  for (std::int32_t i = 0; i < n; ++i) {
    const int first = first_level(sorted.data(), i);
    const int leaf = leaf_level(sliding_max(pre.data(), suf.data(), i, width), options.max_depth);
    // The sliding maximum is the brute-force one.
    std::uint8_t largest = 0;
    for (std::int64_t j = std::max<std::int64_t>(0, i - window); j <= i; ++j) largest = std::max(largest, window_level(sorted.data(), n, j, window));
    EXPECT_EQ(sliding_max(pre.data(), suf.data(), i, width), largest) << "point " << i;
    span[i] = pack_span(first, leaf);
    for (int l = first; l <= leaf; ++l) ++level_nodes[l];
    if (starts_leaf(span[i])) leaf_point.push_back(i);
  }
  t.level_offset = {0};
  for (int l = 0; l <= max_octree_depth && level_nodes[l] != 0; ++l) t.level_offset.push_back(t.level_offset.back() + level_nodes[l]);
  t.depth = static_cast<int>(t.level_offset.size()) - 2;
  std::vector<std::int32_t> device_offset(max_octree_depth + 2);  // level_offsets: every slot
  for (int l = 0; l <= max_octree_depth; ++l) device_offset[l + 1] = device_offset[l] + level_nodes[l];
  // ExclusiveSum of the node counts, expand_nodes, the stable sort by level, number_nodes.
  std::vector<std::int32_t> first_slot(leaf_point.size());
  std::vector<std::pair<std::uint8_t, std::int32_t>> pairs;
  for (std::size_t e = 0; e < leaf_point.size(); ++e) {
    first_slot[e] = static_cast<std::int32_t>(pairs.size());
    const std::uint16_t sp = span[leaf_point[e]];
    for (int l = span_first(sp); l <= span_leaf(sp); ++l) pairs.emplace_back(static_cast<std::uint8_t>(l), static_cast<std::int32_t>(e));
  }
  std::stable_sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::size_t nodes = pairs.size();
  std::vector<std::int32_t> node_leaf(nodes), node_of_slot(nodes, -7);
  for (std::size_t k = 0; k < nodes; ++k) {
    node_leaf[k] = pairs[k].second;
    const std::int32_t e = pairs[k].second;
    node_of_slot[first_slot[e] + pairs[k].first - span_first(span[leaf_point[e]])] = static_cast<std::int32_t>(k);
  }
  // emit_nodes, in scrambled order (every node reads only the view; parents are written by them).
  const flat_tree_view view{sorted.data(), n, leaf_point.data(), static_cast<std::int32_t>(leaf_point.size()), span.data(),
                            node_leaf.data(), first_slot.data(), node_of_slot.data(), device_offset.data()};
  t.parent.assign(nodes, -7);
  t.first_child.assign(nodes, -7);
  t.child_count.assign(nodes, -7);
  t.point_begin.assign(nodes, -7);
  t.point_count.assign(nodes, -7);
  t.level.assign(nodes, 99);
  t.bounds.assign(nodes, box{});
  t.leaves.assign(leaf_point.size(), -7);
  std::vector<std::int32_t> order(nodes);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const flat_tree_out arrays{t.parent.data(),      t.first_child.data(), t.child_count.data(), t.point_begin.data(),
                            t.point_count.data(), t.level.data(),       t.bounds.data(),      t.leaves.data()};
  for (const std::int32_t id : order) emit_flat_node(view, cube, id, pairs[id].first, arrays);
  return out;
}

void expect_same_tree(const octree& device, const octree& host) {
  EXPECT_EQ(device.depth, host.depth);
  EXPECT_EQ(device.level_offset, host.level_offset);
  EXPECT_EQ(device.parent, host.parent);
  EXPECT_EQ(device.first_child, host.first_child);
  EXPECT_EQ(device.child_count, host.child_count);
  EXPECT_EQ(device.point_begin, host.point_begin);
  EXPECT_EQ(device.point_count, host.point_count);
  EXPECT_EQ(device.level, host.level);
  EXPECT_EQ(device.leaves, host.leaves);
  EXPECT_TRUE(same_bits(device.points, host.points));
  ASSERT_EQ(device.bounds.size(), host.bounds.size());
  for (std::size_t i = 0; i < host.bounds.size(); ++i) ASSERT_TRUE(same_box(device.bounds[i], host.bounds[i])) << "node " << i;
}

void expect_permutation(const emulated_build& e, const std::vector<point>& input) {
  ASSERT_EQ(e.permutation.size(), input.size());
  std::vector<char> seen(input.size(), 0);
  for (std::size_t i = 0; i < input.size(); ++i) {
    const std::int32_t p = e.permutation[i];
    ASSERT_TRUE(p >= 0 && static_cast<std::size_t>(p) < input.size() && !seen[p]) << "position " << i;
    seen[p] = 1;
    ASSERT_TRUE(same_bits(e.tree.points[i], input[p])) << "position " << i;
  }
}

void expect_emulation_matches(const std::vector<point>& pts, const build_options& o, std::uint64_t scramble = 1) {
  const octree host = build_octree(pts, o);
  const emulated_build device = emulate_device_build(pts, o, scramble);
  expect_same_tree(device.tree, host);
  expect_permutation(device, pts);
  ASSERT_NO_THROW(check_invariants(device.tree));
}

struct steps_case {
  std::string name;
  std::vector<point> points;
  build_options options;
};

void PrintTo(const steps_case& c, std::ostream* os) { *os << c.name << " (" << c.points.size() << " points)"; }

std::vector<steps_case> steps_cases() {
  std::vector<steps_case> cases;
  for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{17}, std::size_t{1001}, std::size_t{40000}}) {
    for (const build_options o : {build_options{}, build_options{1, 21}, build_options{8, 4}, build_options{100, 21}, build_options{2000, 21}}) {
      const std::string suffix = "_n" + std::to_string(n) + "_leaf" + std::to_string(o.max_leaf) + "_depth" + std::to_string(o.max_depth);
      cases.push_back({"uniform" + suffix, generate_uniform(n, n + 1), o});
      cases.push_back({"plummer" + suffix, generate_plummer(n, n + 2), o});
      cases.push_back({"clusters" + suffix, generate_clusters(n, n + 3), o});
    }
  }
  cases.push_back({"lattice_depth3", generate_lattice(3, 5, 9), {5, 21}});
  cases.push_back({"lattice_depth3_split_below", generate_lattice(3, 5, 9), {4, 21}});
  for (int depth : {0, 1, 2, 21}) {
    cases.push_back({"identical_depth" + std::to_string(depth), std::vector<point>(100, point{0.1f, 0.2f, 0.3f, 1.0f}), {1, depth}});
  }
  {  // identical points among others, and input order of equal codes (masses tag them)
    std::vector<point> p = generate_uniform(3000, 5);
    for (int i = 0; i < 200; ++i) p.push_back(point{0.5f, 0.5f, 0.5f, static_cast<float>(i)});
    std::mt19937_64 rng(1);
    std::shuffle(p.begin(), p.end(), rng);
    cases.push_back({"identical_inside_uniform", p, {4, 21}});
  }
  for (const canopy::testing::edge_case& c : canopy::testing::accepted_edge_cases()) cases.push_back({"edge_" + c.name, c.points, c.options});
  // The root's cell is the cube itself: here cube.lo + edge rounds away from cube.hi on y and z
  // (a review found the flat build recomputing it).
  cases.push_back({"root_cube_rounding", {point{4000.0f, 0.1f, 0.5f, 1.0f}, point{4000.0f, 0.7f, 0.5f, 1.0f}}, {}});
  return cases;
}

class OctreeStepsEmulation : public ::testing::TestWithParam<steps_case> {};

TEST_P(OctreeStepsEmulation, MatchesBuildOctreeNodeForNode) {
  expect_emulation_matches(GetParam().points, GetParam().options, GetParam().points.size() + 1);
}

INSTANTIATE_TEST_SUITE_P(Inputs, OctreeStepsEmulation, ::testing::ValuesIn(steps_cases()),
                         [](const ::testing::TestParamInfo<steps_case>& info) { return info.param.name; });

TEST(OctreeStepsEmulationExtra, LargePlummerAnyReduceOrder) {
  const std::vector<point> pts = generate_plummer(300000, 21);
  for (std::uint64_t scramble : {1u, 2u}) expect_emulation_matches(pts, {32, 21}, scramble);
}

TEST(OctreeStepsEmulationExtra, EmptyInputIsTheHostsOneNodeTree) {
  const emulated_build e = emulate_device_build({}, {}, 1);
  expect_same_tree(e.tree, build_octree({}));
}

TEST(OctreeStepsEmulationExtra, RejectsTheSamePointWithTheSameProblem) {
  std::vector<point> pts = generate_uniform(50000, 2);
  pts[40000].x = std::numeric_limits<float>::infinity();
  pts[30000].m = std::numeric_limits<float>::quiet_NaN();
  pts[45000].z = -3e15f;
  for (int round = 0; round < 3; ++round) {
    std::optional<std::string> host, device;
    try {
      build_octree(pts);
    } catch (const input_error& e) {
      host = e.problem();
    }
    try {
      emulate_device_build(pts, {}, 5);
    } catch (const input_error& e) {
      device = e.problem();
      EXPECT_EQ(e.source(), "device_octree_builder");
    }
    ASSERT_TRUE(host && device);
    EXPECT_EQ(*device, *host);
    if (round == 0) {
      EXPECT_NE(host->find("point 30000"), std::string::npos) << *host;
      pts[30000].m = 1.0f;
    } else if (round == 1) {
      EXPECT_NE(host->find("point 40000"), std::string::npos) << *host;
      pts[40000].x = 0.5f;
    } else {
      EXPECT_NE(host->find("point 45000"), std::string::npos) << *host;
      EXPECT_NE(host->find("beyond"), std::string::npos) << *host;
    }
  }
}

}  // namespace
}  // namespace canopy::trees
