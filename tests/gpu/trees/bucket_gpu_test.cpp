// SPDX-License-Identifier: Apache-2.0
// Bucket tasks (canopy/passes/bucket_pass.hpp) on the GPU: the warp's segmented reduction by leaf
// and its waves against the double reference, over leaf sizes from 1 to far past a bucket (big
// leaves), buckets from 1 point to the whole tree, every mode (the warp-master modes run a bucket
// on one thread), grids of one block and full ones, and the device-tree runner. Host code (g++):
// through upward_runner. Label `gpu`.
#include <canopy/cuda/error.hpp>
#include <canopy/passes/device_octree.cuh>
#include <canopy/passes/upward_runner.hpp>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/reference.hpp>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bucket_test_trees.hpp"
#include "gpu_test.hpp"

namespace {
namespace ct = canopy::trees;

class bucket_gpu : public canopy::test::gpu_test {};

std::vector<std::pair<std::string, ct::octree>> trees() { return canopy::test::bucket_test_trees(); }

std::string what(const std::string& tree, int budget, canopy::mode m, int blocks) {
  return tree + ", " + std::to_string(budget) + " points a bucket, " + std::string(canopy::to_string(m)) + ", " +
         std::to_string(blocks) + " blocks";
}

TEST_F(bucket_gpu, every_bucket_size_matches_the_reference) {
  for (const auto& [name, tree] : trees()) {
    const auto ref = ct::reference_upward_pass(tree);
    for (const int budget : {1, 5, 31, 128, 129, 130, 255, 256}) {
      ct::upward_options o{ct::pass_backend::gpu, ct::pass_tasks::bucket, {}};
      o.bucket_points = budget;
      ct::upward_runner pass(tree, o);
      EXPECT_EQ(pass.lanes(), 32);
      for (const canopy::mode m : {canopy::mode::continuation, canopy::mode::lockfree}) {
        pass.set_mode(m);
        pass.poison();
        const canopy::run_result r = pass.run();
        ASSERT_TRUE(r.ok()) << what(name, budget, m, 0) << ": " << r.message;
        const auto c = ct::compare_payloads<float>(tree, pass.download(), ref);
        EXPECT_TRUE(c.within_tolerance) << what(name, budget, m, 0) << ": " << c.summary();
      }
    }
  }
}

TEST_F(bucket_gpu, every_mode_and_grid_matches_the_reference) {
  const ct::octree tree = ct::build_octree(ct::generate_plummer(40000, 7), {16, 21});
  const auto ref = ct::reference_upward_pass(tree);
  for (const int blocks : {1, 7, 0}) {
    for (const int threads : {32, 128}) {
      ct::upward_options o{ct::pass_backend::gpu, ct::pass_tasks::bucket, {}};
      o.bucket_points = 200;
      o.scheduler.blocks = blocks;
      o.scheduler.threads_per_block = threads;
      ct::upward_runner pass(tree, o);
      for (const canopy::mode m : canopy::all_modes) {
        pass.set_mode(m);
        pass.poison();
        const canopy::run_result r = pass.run();
        ASSERT_TRUE(r.ok()) << what("plummer 40k", 200, m, blocks) << ": " << r.message;
        const auto c = ct::compare_payloads<float>(tree, pass.download(), ref);
        EXPECT_TRUE(c.within_tolerance) << what("plummer 40k", 200, m, blocks) << " x " << threads << ": " << c.summary();
      }
    }
  }
}

TEST_F(bucket_gpu, refuses_what_shared_memory_cannot_hold) {
  const ct::octree tree = ct::build_complete_octree(2, 8, 3);
  ct::upward_options o{ct::pass_backend::gpu, ct::pass_tasks::bucket, {}};
  o.bucket_points = 257;
  EXPECT_THROW(ct::upward_runner(tree, o), std::invalid_argument);
  o.bucket_points = -1;
  EXPECT_THROW(ct::upward_runner(tree, o), std::invalid_argument);
  o.bucket_points = 256;
  o.scheduler.threads_per_block = 160;
  EXPECT_THROW(ct::upward_runner(tree, o), std::invalid_argument);
  o.scheduler.threads_per_block = 128;
  EXPECT_NO_THROW(ct::upward_runner(tree, o));
}

TEST_F(bucket_gpu, repeated_runs_and_the_device_tree_runner_agree) {
  const ct::octree tree = ct::build_octree(ct::generate_plummer(100000, 8), {32, 21});
  const auto ref = ct::reference_upward_pass(tree);
  const ct::device_octree d(tree);
  ct::device_payloads<float> payloads(d.node_count());
  ct::upward_options o{ct::pass_backend::gpu, ct::pass_tasks::bucket, {}};  // the default bucket size
  ct::upward_runner pass(d, payloads, o);
  for (int run = 0; run < 20; ++run) {
    payloads.fill_bytes(0xff);
    CANOPY_TEST_CUDA(cudaDeviceSynchronize());
    const canopy::run_result r = pass.run();
    ASSERT_TRUE(r.ok()) << "run " << run << ": " << r.message;
    const auto c = ct::compare_payloads<float>(tree, payloads.download(), ref);
    ASSERT_TRUE(c.within_tolerance) << "run " << run << ": " << c.summary();
  }
  // set_tree: the next step's tree, its buckets made again.
  const ct::octree next = ct::build_octree(ct::generate_plummer(60000, 9), {8, 21});
  const ct::device_octree d2(next);
  ct::device_payloads<float> payloads2(d2.node_count());
  pass.set_tree(d2, payloads2);
  ASSERT_TRUE(pass.run().ok());
  EXPECT_TRUE(ct::compare_payloads<float>(next, payloads2.download(), ct::reference_upward_pass(next)).within_tolerance);
}

}  // namespace
