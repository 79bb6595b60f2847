// SPDX-License-Identifier: Apache-2.0
// The octree edge cases of tests/cpu/stress/edge_cases_test.cpp through the GPU backend: empty,
// one point, identical points, 1-ULP neighbours, denormals, near +-3e38, the depth limit; each
// built, run in modes mutex, lockfree and continuation with lane groups of 1, 2 and 8 lanes per
// node, and compared with the double reference.
// (NaN, infinite values and depths beyond the limit are refused on the host before any device
// work; the CPU test covers them.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "canopy/gpu_scheduler.cuh"
#include "canopy/passes/device_octree.cuh"
#include "canopy/trees/octree.hpp"
#include "canopy/trees/reference.hpp"
#include "canopy/passes/upward_pass.hpp"
#include "edge_case_sets.hpp"
#include "gpu_test.hpp"

namespace {
namespace ct = canopy::trees;
using canopy::testing::edge_case;

class EdgeCaseGpu : public canopy::test::gpu_test, public ::testing::WithParamInterface<edge_case> {};

TEST_P(EdgeCaseGpu, SchedulerMatchesTheReference) {
  const edge_case& c = GetParam();
  const ct::octree tree = ct::build_octree(c.points, c.options);
  ASSERT_NO_THROW(ct::check_invariants(tree));
  const auto ref = ct::reference_upward_pass(tree);
  ct::device_octree dtree(tree);
  ct::device_payloads<float> payloads(tree.node_count());
  const auto t = dtree.ref();
  for (int lanes : {1, 2, 8}) {  // one thread per node, the default pair, a full lane group of 8
    ct::with_upward_lanes(lanes, [&](auto L) {
      const ct::upward_ops<float, L()> ops{t.points, t.first_child, t.child_count, t.point_begin, t.point_count, payloads.data()};
      for (canopy::mode m : {canopy::mode::mutex, canopy::mode::lockfree, canopy::mode::continuation}) {
        const std::string what = std::string(canopy::to_string(m)) + ", " + std::to_string(L()) + " lanes";
        canopy::scheduler_options opt;
        opt.mode = m;
        canopy::gpu_scheduler sched(ct::make_upward_graph(tree), opt);
        std::vector<ct::multipole<float>> poison(static_cast<std::size_t>(tree.node_count()));
        for (auto& p : poison) p.count = 0xdeadbeef;
        payloads.upload(poison);
        const auto r = sched.run(ops);
        EXPECT_TRUE(r.ok()) << what << ": " << r.message;
        if (!r.ok()) continue;
        const auto out = payloads.download();
        const auto cmp = ct::compare_payloads<float>(tree, out, ref);
        EXPECT_TRUE(cmp.within_tolerance) << what << ": " << cmp.summary();
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Octree, EdgeCaseGpu, ::testing::ValuesIn(canopy::testing::accepted_edge_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
