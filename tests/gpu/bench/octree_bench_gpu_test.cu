// SPDX-License-Identifier: Apache-2.0
// The benchmark engine on the GPU: depths 1-3, every mode and baseline validated and timed; an
// injected wrong result fails; the byte count matches the baselines'. Skipped without a device;
// no assertion depends on a measured time.
#include <gtest/gtest.h>

#include <canopy/passes/device_octree.cuh>
#include <canopy/trees/octree.hpp>

#include "baselines/baselines.cuh"
#include "gpu_test.hpp"
#include "octree_bench.hpp"

namespace {

namespace cb = canopy::bench;
namespace trees = canopy::trees;

class bench_octree_gpu : public canopy::test::gpu_test {};

std::vector<cb::tree_case> depths(int from, int to) {
  std::vector<cb::tree_case> out;
  for (int d = from; d <= to; ++d)
    out.push_back({"depth " + std::to_string(d), true, d, 8, [d] { return trees::build_complete_octree(d, 8, 1); }});
  return out;
}

TEST_F(bench_octree_gpu, bytes_match_the_baselines_count) {
  const trees::octree tree = trees::build_complete_octree(3, 8, 1);
  const trees::device_octree d(tree);
  EXPECT_EQ(cb::upward_pass_bytes(tree), cb::upward_pass_bytes(d.ref()));
}

TEST_F(bench_octree_gpu, every_mode_and_baseline_validates_on_depths_1_to_3) {
  ASSERT_TRUE(cb::gpu_device_present());
  cb::bench_options o;
  o.reps = 3;
  o.warmup = 1;
  o.budget_ms = 60000;  // the locked modes are slow by design; here they must still finish
  cb::bench_engine engine(o);
  engine.add_platform(cb::make_gpu_platform());
  engine.add_platform(cb::make_host_platform());
  // Every mode, three on twig tasks, the three baselines, the reference, cpu:continuation (the
  // count itself is octree_bench_test's): one entry each on every tree.
  const auto variants = cb::default_variants("gpu");
  const auto r = engine.run(depths(1, 3), variants, "gpu");
  ASSERT_EQ(r.entries.size(), 3u * variants.size());
  for (const auto& e : r.entries) {
    EXPECT_EQ(e.status, cb::entry_status::ok) << e.tree << " " << e.variant << " (" << e.backend << "): " << e.note;
    if (e.status == cb::entry_status::ok) {
      EXPECT_EQ(e.reps, 3);
      EXPECT_LE(e.min_us, e.median_us);
      EXPECT_LE(e.median_us, e.max_us);
    }
  }
  const auto* gpu = r.facts("gpu");
  ASSERT_NE(gpu, nullptr);
  EXPECT_GT(gpu->sm_count, 0);
  EXPECT_GT(gpu->copy_gb_per_s, 0);
  EXPECT_FALSE(r.any_wrong_result());
  EXPECT_FALSE(r.any_run_failed());
}

TEST_F(bench_octree_gpu, an_injected_wrong_result_fails_for_modes_and_baselines) {
  for (const char* name : {"continuation", "continuation+twig", "level-graph"}) {
    cb::bench_options o;
    o.reps = 3;
    o.inject_wrong_result = name;
    cb::bench_engine engine(o);
    engine.add_platform(cb::make_gpu_platform());
    const auto r = engine.run(depths(2, 2), cb::parse_variant_list(std::string(name) + ",lockfree", "gpu"), "gpu");
    ASSERT_EQ(r.entries.size(), 2u);
    EXPECT_EQ(r.entries[0].status, cb::entry_status::fail) << name;
    EXPECT_TRUE(r.entries[0].wrong_result) << name;
    EXPECT_EQ(r.entries[1].status, cb::entry_status::ok) << r.entries[1].note;
  }
}

}  // namespace
