// SPDX-License-Identifier: Apache-2.0
// device_octree_builder (canopy/passes/device_octree_builder.cuh) against build_octree, node for
// node and bit for bit: structure, point ranges, levels, cell bounds, leaves, level_offset, the
// reordered points and the permutation, over sizes 0 to 16M, uniform/Plummer/clustered input,
// identical points, 1-ULP neighbours, the depth limit, max_leaf 1, AoS and SoA input, rejected
// points, workspace reuse across builds of different sizes, streams, and the upward pass run on
// the result. Label `gpu`; tests that need a device skip themselves without one.
#include <gtest/gtest.h>

#include <canopy/cuda/event.hpp>
#include <canopy/passes/device_octree_builder.cuh>
#include <canopy/passes/upward_runner.hpp>
#include <canopy/trees/errors.hpp>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/reference.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "edge_case_sets.hpp"
#include "gpu_test.hpp"

namespace {

namespace ct = canopy::trees;

static_assert(!std::is_copy_constructible_v<ct::device_octree_builder>);
static_assert(std::is_nothrow_move_constructible_v<ct::device_octree_builder>);

// The input in device memory, as AoS or as SoA.
struct device_input {
  explicit device_input(const std::vector<ct::point>& pts) : aos(pts) {
    std::vector<float> c[4];
    for (const ct::point& p : pts) {
      c[0].push_back(p.x);
      c[1].push_back(p.y);
      c[2].push_back(p.z);
      c[3].push_back(p.m);
    }
    for (int a = 0; a < 4; ++a) soa[a] = canopy::device_buffer<float>(c[a]);
  }
  ct::device_points_soa soa_view() const { return {soa[0].data(), soa[1].data(), soa[2].data(), soa[3].data()}; }
  std::size_t size() const { return aos.size(); }
  canopy::device_buffer<ct::point> aos;
  canopy::device_buffer<float> soa[4];
};

bool same_bits(const ct::point& a, const ct::point& b) { return std::memcmp(&a, &b, sizeof(ct::point)) == 0; }
bool same_box(const ct::box& a, const ct::box& b) { return std::memcmp(&a, &b, sizeof(ct::box)) == 0; }

// Every array of `host` (build_octree's) equals the device build's, and the permutation maps the
// device tree's points back to the input.
void expect_same_build(const ct::built_device_octree& built, const ct::octree& host, const std::vector<ct::point>& input,
                       cudaStream_t stream = nullptr) {
  const ct::octree d = built.download(stream);
  EXPECT_EQ(d.depth, host.depth);
  EXPECT_EQ(d.level_offset, host.level_offset);
  EXPECT_EQ(d.parent, host.parent);
  EXPECT_EQ(d.first_child, host.first_child);
  EXPECT_EQ(d.child_count, host.child_count);
  EXPECT_EQ(d.point_begin, host.point_begin);
  EXPECT_EQ(d.point_count, host.point_count);
  EXPECT_EQ(d.level, host.level);
  EXPECT_EQ(d.leaves, host.leaves);
  ASSERT_EQ(d.points.size(), host.points.size());
  for (std::size_t i = 0; i < host.points.size(); ++i) ASSERT_TRUE(same_bits(d.points[i], host.points[i])) << "point " << i;
  ASSERT_EQ(d.bounds.size(), host.bounds.size());
  for (std::size_t i = 0; i < host.bounds.size(); ++i) ASSERT_TRUE(same_box(d.bounds[i], host.bounds[i])) << "node " << i;

  // The device_octree itself (what the upward pass reads): counts and its own level_offset copies.
  const ct::octree_ref r = built.tree.ref();
  EXPECT_EQ(r.node_count, host.node_count());
  EXPECT_EQ(r.leaf_count, static_cast<std::int32_t>(host.leaves.size()));
  EXPECT_EQ(r.point_total, static_cast<std::int32_t>(host.points.size()));
  EXPECT_EQ(r.depth, host.depth);
  std::vector<std::int32_t> device_levels(host.level_offset.size());
  CANOPY_TEST_CUDA(cudaMemcpy(device_levels.data(), r.level_offset, device_levels.size() * sizeof(std::int32_t),
                              cudaMemcpyDeviceToHost));
  EXPECT_EQ(device_levels, host.level_offset);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(r.points) % 16, 0u);

  // The permutation: a bijection with tree point i = input[permutation[i]], equal codes in input
  // order (the points are sorted by code, so within a run of equal points the indices increase).
  const std::vector<std::int32_t> perm = built.download_permutation(stream);
  ASSERT_EQ(perm.size(), input.size());
  std::vector<char> seen(input.size(), 0);
  for (std::size_t i = 0; i < perm.size(); ++i) {
    const std::int32_t p = perm[i];
    ASSERT_TRUE(p >= 0 && static_cast<std::size_t>(p) < input.size() && !seen[p]) << "position " << i;
    seen[p] = 1;
    ASSERT_TRUE(same_bits(d.points[i], input[p])) << "position " << i;
    if (i > 0 && same_bits(input[perm[i - 1]], input[p])) ASSERT_LT(perm[i - 1], p) << "unstable at position " << i;
  }
}

// Builds `pts` on the device (AoS, and SoA unless aos_only) and compares with build_octree.
void expect_matches_host(ct::device_octree_builder& builder, const std::vector<ct::point>& pts, const ct::build_options& o,
                         bool aos_only = false) {
  const ct::octree host = ct::build_octree(pts, o);
  const device_input in(pts);
  {
    SCOPED_TRACE("AoS");
    const ct::built_device_octree built = builder.build(in.aos.data(), in.size(), o);
    expect_same_build(built, host, pts);
  }
  if (!aos_only) {
    SCOPED_TRACE("SoA");
    const ct::built_device_octree built = builder.build(in.soa_view(), in.size(), o);
    expect_same_build(built, host, pts);
  }
}

class device_octree_builder_gpu : public canopy::test::gpu_test {};

TEST_F(device_octree_builder_gpu, small_sizes_and_distributions) {
  ct::device_octree_builder builder;
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{33}, std::size_t{1001},
                        std::size_t{99999}}) {
    // max_leaf 2000: windows wider than most inputs here (and than the scans' segments' usual size)
    for (const ct::build_options o : {ct::build_options{}, ct::build_options{1, 21}, ct::build_options{8, 4},
                                      ct::build_options{2000, 21}}) {
      SCOPED_TRACE("n " + std::to_string(n) + " max_leaf " + std::to_string(o.max_leaf) + " max_depth " +
                   std::to_string(o.max_depth));
      expect_matches_host(builder, ct::generate_uniform(n, n + 1), o);
      expect_matches_host(builder, ct::generate_plummer(n, n + 2), o);
      expect_matches_host(builder, ct::generate_clusters(n, n + 3), o);
    }
  }
}

TEST_F(device_octree_builder_gpu, empty_input_is_the_hosts_one_node_tree) {
  ct::device_octree_builder builder;
  const ct::built_device_octree built = builder.build(static_cast<const ct::point*>(nullptr), 0);
  EXPECT_EQ(built.tree.node_count(), 1);
  EXPECT_EQ(built.tree.leaf_count(), 1);
  EXPECT_EQ(built.tree.point_total(), 0);
  expect_same_build(built, ct::build_octree({}), {});
  const ct::built_device_octree soa = builder.build(ct::device_points_soa{}, 0);
  expect_same_build(soa, ct::build_octree({}), {});
}

TEST_F(device_octree_builder_gpu, million_points_each_distribution) {
  ct::device_octree_builder builder;
  expect_matches_host(builder, ct::generate_plummer(1 << 20, 5), {32, 21});
  expect_matches_host(builder, ct::generate_uniform(1000003, 6), {32, 21}, true);
  expect_matches_host(builder, ct::generate_clusters(1000001, 7), {16, 21}, true);
  expect_matches_host(builder, ct::generate_plummer(1 << 20, 8), {1, 21}, true);
  expect_matches_host(builder, ct::generate_plummer(1 << 20, 9), {5000, 21}, true);
}

// The spans' two paths: the tiled kernel (windows up to 1,024 points, many tiles) and the
// segmented scans (wider), on both sides of the boundary; and a root cube whose lo + edge rounds
// away from its hi (the root's cell must be the cube itself).
TEST_F(device_octree_builder_gpu, window_paths_and_the_root_cube) {
  ct::device_octree_builder builder;
  const std::vector<ct::point> pts = ct::generate_plummer(200000, 10);
  for (int max_leaf : {100, 1023, 1024, 1025, 4096}) {
    SCOPED_TRACE("max_leaf " + std::to_string(max_leaf));
    expect_matches_host(builder, pts, {max_leaf, 21});
  }
  expect_matches_host(builder, {ct::point{4000.0f, 0.1f, 0.5f, 1.0f}, ct::point{4000.0f, 0.7f, 0.5f, 1.0f}}, {});
}

TEST_F(device_octree_builder_gpu, edge_cases_of_the_stress_suite) {
  ct::device_octree_builder builder;
  for (const canopy::testing::edge_case& c : canopy::testing::accepted_edge_cases()) {
    SCOPED_TRACE(c.name);
    expect_matches_host(builder, c.points, c.options);
  }
}

TEST_F(device_octree_builder_gpu, identical_points_stop_at_the_depth_limit) {
  ct::device_octree_builder builder;
  const std::vector<ct::point> same(1000, ct::point{0.25f, 0.5f, 0.75f, 1.0f});
  for (int depth : {0, 1, 2, 21}) {
    SCOPED_TRACE("max_depth " + std::to_string(depth));
    expect_matches_host(builder, same, {1, depth});
    const ct::built_device_octree built = builder.build(device_input(same).aos.data(), same.size(), {1, depth});
    EXPECT_EQ(built.tree.depth(), depth);
    EXPECT_EQ(built.tree.node_count(), depth + 1);  // a chain of single children
  }
  // Identical points among others, shuffled, tagged by mass: equal codes keep input order.
  std::vector<ct::point> mixed = ct::generate_uniform(50000, 3);
  for (int i = 0; i < 5000; ++i) mixed.push_back(ct::point{0.5f, 0.5f, 0.5f, static_cast<float>(i)});
  std::shuffle(mixed.begin(), mixed.end(), std::mt19937_64(4));
  expect_matches_host(builder, mixed, {4, 21});
}

TEST_F(device_octree_builder_gpu, one_ulp_neighbours) {
  ct::device_octree_builder builder;
  std::vector<ct::point> p;
  float x = 1.0f;
  for (int i = 0; i < 4096; ++i) {
    p.push_back(ct::point{x, 1.0f, std::nextafter(1.0f, 2.0f * static_cast<float>(i % 2)), 1.0f});
    x = std::nextafter(x, 2.0f);
  }
  p.push_back(ct::point{-1.0f, -1.0f, -1.0f, 1.0f});
  for (const ct::build_options o : {ct::build_options{1, 21}, ct::build_options{3, 21}, ct::build_options{1, 10}}) {
    expect_matches_host(builder, p, o);
  }
}

TEST_F(device_octree_builder_gpu, rejected_points_throw_the_hosts_input_error) {
  ct::device_octree_builder builder;
  const std::vector<ct::point> pts = ct::generate_uniform(300000, 9);
  const device_input good(pts);
  struct bad {
    std::size_t index;
    int field;
    float value;
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (const bad b : {bad{299999, 0, std::numeric_limits<float>::quiet_NaN()}, bad{123456, 1, inf}, bad{0, 2, -inf},
                      bad{77, 3, std::numeric_limits<float>::quiet_NaN()}, bad{250000, 0, 2e15f},
                      bad{5, 2, -static_cast<float>(ct::max_coordinate_magnitude) * 1.0001f}}) {
    std::vector<ct::point> p = pts;
    float* fields[4] = {&p[b.index].x, &p[b.index].y, &p[b.index].z, &p[b.index].m};
    *fields[b.field] = b.value;
    p[b.index + 1 < p.size() ? b.index + 1 : b.index - 1].y = inf;  // a second bad point beside it
    std::string host_problem;
    try {
      ct::build_octree(p);
      FAIL() << "build_octree accepted a bad point";
    } catch (const ct::input_error& e) {
      host_problem = e.problem();
    }
    const device_input in(p);
    for (int layout = 0; layout < 2; ++layout) {
      ct::built_device_octree out = builder.build(good.aos.data(), 100);  // a valid tree, to see it emptied
      ASSERT_EQ(out.tree.node_count(), ct::build_octree(std::vector<ct::point>(pts.begin(), pts.begin() + 100)).node_count());
      try {
        if (layout == 0) {
          builder.build_into(in.aos.data(), in.size(), {}, out);
        } else {
          builder.build_into(in.soa_view(), in.size(), {}, out);
        }
        ADD_FAILURE() << "the device builder accepted point " << b.index;
      } catch (const ct::input_error& e) {
        EXPECT_EQ(e.source(), "device_octree_builder");
        EXPECT_EQ(e.problem(), host_problem) << "layout " << layout;
      }
      EXPECT_EQ(out.tree.node_count(), 0) << "a failed build leaves an empty result";
    }
  }
  // The builder is still usable.
  expect_matches_host(builder, pts, {});
}

TEST_F(device_octree_builder_gpu, workspace_is_reused_across_builds_of_different_sizes) {
  ct::device_octree_builder builder;
  ct::built_device_octree out;
  cudaStream_t stream = nullptr;
  CANOPY_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // One builder and one result through growing, shrinking and empty inputs, AoS and SoA, other
  // options each time: every result must be right.
  const std::size_t sizes[] = {200000, 1000, 500000, 0, 7, 500000, 499999, 30000, 1};
  for (std::size_t round = 0; round < std::size(sizes); ++round) {
    const std::size_t n = sizes[round];
    SCOPED_TRACE("round " + std::to_string(round) + ", n " + std::to_string(n));
    const std::vector<ct::point> pts = round % 2 ? ct::generate_clusters(n, round) : ct::generate_plummer(n, round);
    const ct::build_options o{static_cast<int>(1 + round * 5), static_cast<int>(21 - round)};
    const device_input in(pts);
    if (round % 3 == 2) {
      builder.build_into(in.soa_view(), n, o, out, stream);
    } else {
      builder.build_into(in.aos.data(), n, o, out, stream);
    }
    expect_same_build(out, ct::build_octree(pts, o), pts, stream);
  }
  // The same build again allocates nothing: the workspace and the result's node arrays stay put.
  const std::vector<ct::point> pts = ct::generate_plummer(300000, 77);
  const device_input in(pts);
  builder.build_into(in.aos.data(), pts.size(), {}, out, stream);
  const std::size_t workspace = builder.workspace_bytes(), result = out.bytes();
  const std::int32_t* parent = out.tree.ref().parent;
  const ct::point* points = out.tree.ref().points;
  for (int again = 0; again < 3; ++again) {
    builder.build_into(in.aos.data(), pts.size(), {}, out, stream);
    EXPECT_EQ(builder.workspace_bytes(), workspace);
    EXPECT_EQ(out.bytes(), result);
    EXPECT_EQ(out.tree.ref().parent, parent);
    EXPECT_EQ(out.tree.ref().points, points);
  }
  expect_same_build(out, ct::build_octree(pts), pts, stream);
  // A smaller build after it grows nothing either.
  builder.build_into(in.aos.data(), pts.size() / 2, {}, out, stream);
  EXPECT_EQ(builder.workspace_bytes(), workspace);
  EXPECT_EQ(out.bytes(), result);
  const std::vector<ct::point> half(pts.begin(), pts.begin() + static_cast<std::ptrdiff_t>(pts.size() / 2));
  expect_same_build(out, ct::build_octree(half), half, stream);
  // A moved builder keeps its workspace and builds on the legacy stream.
  ct::device_octree_builder other = std::move(builder);
  EXPECT_EQ(other.workspace_bytes(), workspace);
  other.build_into(in.aos.data(), pts.size(), {}, out, nullptr);
  expect_same_build(out, ct::build_octree(pts), pts, nullptr);
  CANOPY_TEST_CUDA(cudaStreamDestroy(stream));
}

TEST_F(device_octree_builder_gpu, result_feeds_the_gpu_upward_pass) {
  const std::vector<ct::point> pts = ct::generate_plummer(200000, 12);
  ct::device_octree_builder builder;
  const device_input in(pts);
  const ct::built_device_octree built = builder.build(in.aos.data(), pts.size(), {16, 21});
  const ct::octree host = built.download();  // the runner's task graph comes from the host arrays
  const auto ref = ct::reference_upward_pass(ct::build_octree(pts, {16, 21}));
  ct::device_payloads<float> payloads(built.tree.node_count());
  for (const ct::pass_tasks kind : ct::all_pass_tasks) {
    ct::upward_runner pass(host, built.tree, payloads, ct::upward_options{ct::pass_backend::gpu, kind, {}});
    pass.poison();
    const canopy::run_result r = pass.run();
    ASSERT_TRUE(r.ok()) << r.message;
    const auto c = ct::compare_payloads<float>(host, payloads.download(), ref);
    EXPECT_TRUE(c.within_tolerance) << ct::to_string(kind) << ": " << c.summary();
  }
}

// Not a performance test (no bound is asserted on time): prints the workspace per point and the
// median time of warm builds, for the README and later tuning, and checks the 16M tree.
TEST_F(device_octree_builder_gpu, reports_workspace_and_time_of_large_builds) {
  ct::device_octree_builder builder;
  ct::built_device_octree out;
  for (const std::size_t n : {std::size_t{1} << 20, std::size_t{16} << 20}) {
    const std::vector<ct::point> pts = ct::generate_plummer(n, 42);
    const device_input in(pts);
    builder.build_into(in.aos.data(), n, {32, 21}, out);
    CANOPY_TEST_CUDA(cudaDeviceSynchronize());
    std::vector<float> ms;
    for (int rep = 0; rep < 7; ++rep) {
      canopy::cuda_event start, stop;
      start.record();
      builder.build_into(in.aos.data(), n, {32, 21}, out);
      stop.record();
      ms.push_back(canopy::elapsed_ms(start, stop));
    }
    std::sort(ms.begin(), ms.end());
    const double per_point = static_cast<double>(builder.workspace_bytes()) / static_cast<double>(n);
    std::printf("[ perf ] device_octree_builder Plummer %zu points, max_leaf 32: %d nodes, depth %d; "
                "build median %.3f ms (min %.3f, max %.3f); workspace %.2f bytes/point, result %.2f bytes/point\n",
                n, out.tree.node_count(), out.tree.depth(), ms[ms.size() / 2], ms.front(), ms.back(), per_point,
                static_cast<double>(out.bytes()) / static_cast<double>(n));
    EXPECT_LT(per_point, 32.0) << "the header documents about 20 bytes per point plus level and CUB buffers";
    expect_same_build(out, ct::build_octree(pts, {32, 21}), pts);
  }
}

// ---- host-only behaviour: no device needed ------------------------------------------------------

TEST(device_octree_builder_host, constructing_makes_no_cuda_call) {
  ct::device_octree_builder builder;
  EXPECT_EQ(builder.workspace_bytes(), 0u);
  const ct::built_device_octree empty;
  EXPECT_EQ(empty.tree.node_count(), 0);
  EXPECT_EQ(empty.bytes(), 0u);
  EXPECT_EQ(empty.download().node_count(), 0);
}

TEST(device_octree_builder_host, bad_options_and_pointers_are_rejected_before_any_cuda_call) {
  ct::device_octree_builder builder;
  ct::built_device_octree out;
  const auto* none = static_cast<const ct::point*>(nullptr);
  try {
    builder.build_into(none, 10, {0, 21}, out);
    ADD_FAILURE() << "max_leaf 0 accepted";
  } catch (const ct::input_error& e) {
    EXPECT_EQ(e.source(), "device_octree_builder: max_leaf");
  }
  try {
    builder.build_into(none, 10, {32, 22}, out);
    ADD_FAILURE() << "max_depth 22 accepted";
  } catch (const ct::input_error& e) {
    EXPECT_EQ(e.source(), "device_octree_builder: max_depth");
  }
  EXPECT_THROW(builder.build_into(none, std::size_t{1} << 31, {}, out), ct::input_error);
  EXPECT_THROW(builder.build_into(none, 10, {}, out), std::invalid_argument);
  EXPECT_THROW(builder.build_into(ct::device_points_soa{}, 10, {}, out), std::invalid_argument);
  EXPECT_EQ(builder.workspace_bytes(), 0u);
}

TEST_F(device_octree_builder_gpu, host_memory_is_refused) {
  ct::device_octree_builder builder;
  const std::vector<ct::point> pts = ct::generate_uniform(10, 1);
  EXPECT_THROW(builder.build(pts.data(), pts.size()), std::invalid_argument);
}

TEST(device_octree_adopt, rejects_malformed_counts) {
  using arrays = ct::device_octree::arrays;
  EXPECT_THROW(ct::device_octree::adopt(arrays{}, {0}, 1, 0), std::invalid_argument);
  EXPECT_THROW(ct::device_octree::adopt(arrays{}, {0, 2}, 1, 0), std::invalid_argument);
  EXPECT_THROW(ct::device_octree::adopt(arrays{}, {0, 1, 1}, 1, 0), std::invalid_argument);
  EXPECT_THROW(ct::device_octree::adopt(arrays{}, {0, 1}, 1, 0), std::invalid_argument);  // no buffers
}

}  // namespace
