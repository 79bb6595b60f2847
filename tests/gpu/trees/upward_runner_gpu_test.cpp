// SPDX-License-Identifier: Apache-2.0
// upward_runner (canopy/passes/upward_runner.hpp) on the gpu backend: each task kind and mode
// against the double reference on its own upload, then node and twig runners sharing one device
// tree and payloads (as the benchmark does) on a stream of their own, poison, and the device view.
// Host code (g++): the runner's interface needs no CUDA compiler. Label `gpu`.
#include <canopy/cuda/error.hpp>
#include <canopy/passes/device_octree.cuh>
#include <canopy/passes/upward_runner.hpp>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/reference.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test.hpp"

namespace {
namespace ct = canopy::trees;

class upward_runner_gpu : public canopy::test::gpu_test {};

TEST_F(upward_runner_gpu, every_kind_and_mode_matches_the_reference) {
  const std::vector<ct::octree> trees = {ct::build_complete_octree(4, 8, 1),
                                         ct::build_octree(ct::generate_plummer(20000, 2), {16, 21})};
  for (const ct::octree& tree : trees) {
    const auto ref = ct::reference_upward_pass(tree);
    for (const ct::pass_tasks kind : ct::all_pass_tasks) {
      ct::upward_runner pass(tree, ct::upward_options{ct::pass_backend::gpu, kind, {}});
      EXPECT_EQ(pass.device_tree().node_count, tree.node_count());
      for (const canopy::mode m : canopy::all_modes) {
        pass.set_mode(m);
        pass.poison();
        const ct::timed_run t = pass.run_timed();
        ASSERT_TRUE(t.result.ok()) << ct::to_string(kind) << " " << canopy::to_string(m) << ": " << t.result.message;
        EXPECT_GT(t.elapsed_us, 0);
        const auto c = ct::compare_payloads<float>(tree, pass.download(), ref);
        EXPECT_TRUE(c.within_tolerance) << ct::to_string(kind) << " " << canopy::to_string(m) << ": " << c.summary();
      }
      EXPECT_GT(pass.grid(), 0);
      EXPECT_NE(pass.describe().find(std::string(ct::to_string(kind)) + " tasks of " + std::to_string(pass.lanes()) +
                                     " lanes"),
                std::string::npos)
          << pass.describe();
    }
  }
}

TEST_F(upward_runner_gpu, runners_share_the_callers_device_data_on_a_stream) {
  const ct::octree tree = ct::build_complete_octree(3, 8, 3);
  const auto ref = ct::reference_upward_pass(tree);
  const ct::device_octree d(tree);
  ct::device_payloads<float> payloads(d.node_count());
  ct::upward_runner node(tree, d, payloads, ct::upward_options{ct::pass_backend::gpu, ct::pass_tasks::node, {}});
  ct::upward_options twig_options{ct::pass_backend::gpu, ct::pass_tasks::twig, {}};
  twig_options.scheduler.threads_per_block = 256;
  ct::upward_runner twig(tree, d, payloads, twig_options);
  EXPECT_EQ(node.device_payloads_data(), payloads.data());
  EXPECT_EQ(twig.device_payloads_data(), payloads.data());
  cudaStream_t stream = nullptr;
  CANOPY_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (ct::upward_runner* pass : {&node, &twig}) {
    pass->poison();
    EXPECT_TRUE(std::isnan(payloads.download().front().mass));
    const canopy::run_result r = pass->run(stream);
    ASSERT_TRUE(r.ok()) << r.message;
    CANOPY_TEST_CUDA(cudaStreamSynchronize(stream));
    EXPECT_TRUE(ct::compare_payloads<float>(tree, payloads.download(), ref).within_tolerance)
        << ct::to_string(pass->tasks());
  }
  CANOPY_TEST_CUDA(cudaStreamDestroy(stream));
  EXPECT_EQ(twig.options().threads_per_block, 256);
}

TEST_F(upward_runner_gpu, lanes_can_be_chosen) {
  const ct::octree tree = ct::build_complete_octree(3, 8, 4);
  for (const int lanes : {1, 2, 4, 8}) {
    ct::upward_options o{ct::pass_backend::gpu, ct::pass_tasks::node, {}};
    o.lanes = lanes;
    ct::upward_runner pass(tree, o);
    EXPECT_EQ(pass.lanes(), lanes);
    ASSERT_TRUE(pass.run().ok());
  }
}

}  // namespace
