// SPDX-License-Identifier: Apache-2.0
// Edge cases of the octree path, each through build_octree, check_invariants, the reference
// (against brute-force moments) and the CPU scheduler (modes mutex, lockfree, continuation)
// against the reference; and the inputs that must be refused with a typed error (NaN and
// infinite coordinates or masses, a depth beyond the limit). tests/gpu/stress has the GPU twin.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "canopy/cpu_scheduler.hpp"
#include "canopy/trees/errors.hpp"
#include "canopy/trees/octree.hpp"
#include "canopy/trees/point_io.hpp"
#include "canopy/trees/reference.hpp"
#include "canopy/passes/upward_pass.hpp"
#include "edge_case_sets.hpp"

namespace {
namespace ct = canopy::trees;
using canopy::testing::edge_case;

class EdgeCase : public ::testing::TestWithParam<edge_case> {};

TEST_P(EdgeCase, BuildReferenceAndSchedulerAgree) {
  const edge_case& c = GetParam();
  const ct::octree tree = ct::build_octree(c.points, c.options);
  ASSERT_NO_THROW(ct::check_invariants(tree));
  EXPECT_LE(tree.depth, c.options.max_depth);
  ASSERT_EQ(tree.point_count[0], static_cast<std::int32_t>(c.points.size()));
  const auto ref = ct::reference_upward_pass(tree);
  ASSERT_EQ(ref[0].count, c.points.size());
  const auto brute = ct::brute_force_moments(tree);
  const auto self = ct::compare_payloads<double>(tree, ref, brute);
  EXPECT_TRUE(self.within_tolerance) << "reference vs brute force: " << self.summary();

  const auto graph = ct::make_upward_graph(tree);
  for (canopy::mode m : {canopy::mode::mutex, canopy::mode::lockfree, canopy::mode::continuation}) {
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.blocks = 3;
    canopy::cpu_scheduler sched(graph, opt);
    std::vector<ct::multipole<float>> out(static_cast<std::size_t>(tree.node_count()));
    for (auto& p : out) p.count = 0xdeadbeef;  // a node never written cannot pass
    const auto r = sched.run(ct::host_upward_ops(tree, out.data()));
    ASSERT_TRUE(r.ok()) << canopy::to_string(m) << ": " << r.message;
    const auto cmp = ct::compare_payloads<float>(tree, out, ref);
    EXPECT_TRUE(cmp.within_tolerance) << canopy::to_string(m) << ": " << cmp.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Octree, EdgeCase, ::testing::ValuesIn(canopy::testing::accepted_edge_cases()),
                         [](const auto& info) { return info.param.name; });

// --- refusals: typed errors, never a tree ----------------------------------------------------------

std::vector<ct::point> with_bad_value(int field, float bad) {
  std::vector<ct::point> p(5, ct::point{0.5f, 0.5f, 0.5f, 1.0f});
  float* v = &p[3].x;
  v[field] = bad;
  return p;
}

TEST(EdgeCaseRefusals, NanAndInfiniteValuesAreInputErrors) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int field = 0; field < 4; ++field) {
    for (float bad : {nan, inf, -inf}) {
      const auto pts = with_bad_value(field, bad);
      SCOPED_TRACE("field " + std::to_string(field) + " value " + std::to_string(bad));
      EXPECT_THROW(ct::build_octree(pts), ct::input_error);
      // The readers refuse the same values, in both formats.
      std::vector<std::byte> file(ct::point_file_header_bytes + 16 * pts.size());
      std::memcpy(file.data(), ct::point_file_magic, 8);
      const std::uint32_t version = ct::point_file_version;
      const std::uint64_t count = pts.size();
      std::memcpy(file.data() + 8, &version, 4);
      std::memcpy(file.data() + 16, &count, 8);
      std::memcpy(file.data() + ct::point_file_header_bytes, pts.data(), 16 * pts.size());
      try {
        (void)ct::parse_points_binary(file, "edge.bin");
        ADD_FAILURE() << "binary reader accepted a non-finite value";
      } catch (const ct::input_error& e) {
        EXPECT_NE(e.problem().find("point 3"), std::string::npos) << e.what();
      }
      std::string csv = "x,y,z,m\n";
      for (const auto& p : pts) {
        const float v[4] = {p.x, p.y, p.z, p.m};
        for (int i = 0; i < 4; ++i) csv += (std::isnan(v[i]) ? std::string("nan") : std::isinf(v[i]) ? std::string(v[i] > 0 ? "inf" : "-inf") : std::to_string(v[i])) + (i < 3 ? "," : "\n");
      }
      try {
        (void)ct::parse_points_csv(csv, "edge.csv");
        ADD_FAILURE() << "CSV reader accepted a non-finite value";
      } catch (const ct::input_error& e) {
        EXPECT_NE(e.problem().find("line 5"), std::string::npos) << e.what();
      }
    }
  }
}

// Coordinates near float's limit (+-3e38, what the readers accept) would overflow the float
// payload's second moments: build_octree refuses anything beyond +-2^50, with a typed error.
TEST(EdgeCaseRefusals, CoordinatesBeyondTheLimitAreInputErrors) {
  const float just_over = std::nextafter(static_cast<float>(ct::max_coordinate_magnitude), 1e30f);
  for (float bad : {3e38f, -3e38f, 1e19f, just_over, -just_over}) {
    for (int axis = 0; axis < 3; ++axis) {
      std::vector<ct::point> pts(4, ct::point{0.5f, 0.5f, 0.5f, 1.0f});
      (&pts[2].x)[axis] = bad;
      try {
        (void)ct::build_octree(pts);
        ADD_FAILURE() << "accepted " << bad << " on axis " << axis;
      } catch (const ct::input_error& e) {
        EXPECT_NE(e.problem().find("point 2"), std::string::npos) << e.what();
        EXPECT_NE(e.problem().find("2^50"), std::string::npos) << e.what();
      }
    }
  }
  // The limit itself is accepted.
  std::vector<ct::point> ok(4, ct::point{0.5f, 0.5f, 0.5f, 1.0f});
  ok[1].z = -static_cast<float>(ct::max_coordinate_magnitude);
  EXPECT_NO_THROW((void)ct::build_octree(ok));
}

TEST(EdgeCaseRefusals, DepthBeyondTheLimitIsAnInputError) {
  const std::vector<ct::point> pts(4, ct::point{0.1f, 0.2f, 0.3f, 1.0f});
  for (int bad : {-1, ct::max_octree_depth + 1, 64}) {
    EXPECT_THROW(ct::build_octree(pts, ct::build_options{1, bad}), ct::input_error) << "max_depth " << bad;
    EXPECT_THROW(ct::build_complete_octree(bad, 1, 1), ct::input_error) << "complete depth " << bad;
  }
  EXPECT_THROW(ct::build_octree(pts, ct::build_options{0, 5}), ct::input_error) << "max_leaf 0";
}

TEST(EdgeCaseRefusals, ATreeDeeperThanAllowedIsAnInvariantError) {
  // A hand-made chain of 23 levels (one child each) breaks the depth limit: check_invariants must
  // refuse it with the typed error, not index past a 21-level table.
  std::vector<ct::point> pts{ct::point{0.0f, 0.0f, 0.0f, 1.0f}, ct::point{1.0f, 1.0f, 1.0f, 1.0f}};
  ct::octree tree = ct::build_octree(pts, ct::build_options{1, ct::max_octree_depth});
  ASSERT_NO_THROW(ct::check_invariants(tree));
  tree.depth = ct::max_octree_depth + 1;
  EXPECT_THROW(ct::check_invariants(tree), ct::invariant_error);
}

}  // namespace
