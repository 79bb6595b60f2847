// SPDX-License-Identifier: Apache-2.0
// The upward pass without the host in the loop: points in device memory, the octree built on the
// device (device_octree_builder), the task graph built on the device from it, the pass enqueued
// with run_async on one stream, payloads left in device memory. Checked against the double
// reference over the host-built tree (the builders agree node for node: their own test), for both
// task kinds and every mode, then a second, larger point set through set_tree (a simulation's
// next step), both overloads: the device tree, and the builder's whole result (node tasks: the
// graph copied from the builder's arrays, no host wait). Label `gpu`.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "canopy/cuda/device_buffer.hpp"
#include "canopy/passes/device_octree.cuh"
#include "canopy/passes/device_octree_builder.cuh"
#include "canopy/passes/upward_runner.hpp"
#include "canopy/trees/generators.hpp"
#include "canopy/trees/reference.hpp"
#include "gpu_test.hpp"

namespace {
namespace ct = canopy::trees;

class gpu_resident_pass : public canopy::test::gpu_test {};

constexpr ct::build_options build{16, 21};

// The pass's payloads against the reference over the host's build of the same points.
::testing::AssertionResult matches_reference(const std::vector<ct::point>& points, const std::vector<ct::multipole<float>>& got) {
  const ct::octree host = ct::build_octree(points, build);
  if (static_cast<std::size_t>(host.node_count()) != got.size())
    return ::testing::AssertionFailure() << got.size() << " payloads, the host's tree has " << host.node_count() << " nodes";
  const auto c = ct::compare_payloads<float>(host, got, ct::reference_upward_pass(host));
  if (!c.within_tolerance) return ::testing::AssertionFailure() << c.summary();
  return ::testing::AssertionSuccess();
}

TEST_F(gpu_resident_pass, every_kind_and_mode_from_device_points) {
  const std::vector<ct::point> points = ct::generate_plummer(60000, 5);
  const canopy::device_buffer<ct::point> d_points(points);
  cudaStream_t stream = nullptr;
  CANOPY_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ct::device_octree_builder builder;
  ct::built_device_octree built;
  builder.build_into(d_points.data(), points.size(), build, built, stream);
  ct::device_payloads<float> payloads(built.tree.node_count());
  for (const ct::pass_tasks kind : ct::all_pass_tasks) {
    ct::upward_runner pass(built.tree, payloads, ct::upward_options{ct::pass_backend::gpu, kind, {}}, stream);
    for (const canopy::mode m : canopy::all_modes) {
      pass.set_mode(m);
      pass.poison();
      pass.run_async(stream);
      CANOPY_TEST_CUDA(cudaStreamSynchronize(stream));
      const canopy::run_result r = pass.last_result();
      ASSERT_TRUE(r.ok()) << ct::to_string(kind) << " " << canopy::to_string(m) << ": " << r.message;
      EXPECT_TRUE(matches_reference(points, pass.download())) << ct::to_string(kind) << " " << canopy::to_string(m);
    }
  }
  CANOPY_TEST_CUDA(cudaStreamDestroy(stream));
}

TEST_F(gpu_resident_pass, set_tree_moves_the_runner_to_the_next_steps_tree) {
  cudaStream_t stream = nullptr;
  CANOPY_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<std::pair<ct::pass_tasks, bool>> cases;  // every kind, each through both overloads
  for (const ct::pass_tasks kind : ct::all_pass_tasks) cases.insert(cases.end(), {{kind, false}, {kind, true}});
  for (const auto& [kind, whole_build] : cases) {
    SCOPED_TRACE(std::string(ct::to_string(kind)) + (whole_build ? ", set_tree(built)" : ", set_tree(built.tree)"));
    ct::device_octree_builder builder;
    ct::built_device_octree built;
    // Steps of different sizes and shapes: smaller and larger trees than the first.
    const std::vector<std::vector<ct::point>> steps = {ct::generate_plummer(30000, 11), ct::generate_uniform(5000, 12),
                                                       ct::generate_plummer(250000, 13), ct::generate_plummer(30000, 14)};
    canopy::device_buffer<ct::point> d_points(steps[0]);
    builder.build_into(d_points.data(), steps[0].size(), build, built, stream);
    ct::device_payloads<float> payloads(built.tree.node_count() * 3);  // room for larger trees
    ct::upward_runner pass(built.tree, payloads, ct::upward_options{ct::pass_backend::gpu, kind, {}}, stream);
    for (std::size_t s = 0; s < steps.size(); ++s) {
      if (s != 0) {
        d_points = canopy::device_buffer<ct::point>(steps[s]);
        builder.build_into(d_points.data(), steps[s].size(), build, built, stream);
        if (payloads.size() < built.tree.node_count()) payloads = ct::device_payloads<float>(built.tree.node_count());
        if (whole_build)
          pass.set_tree(built, payloads, stream);
        else
          pass.set_tree(built.tree, payloads, stream);
      }
      pass.run_async(stream);
      CANOPY_TEST_CUDA(cudaStreamSynchronize(stream));
      const canopy::run_result r = pass.last_result();
      ASSERT_TRUE(r.ok()) << "step " << s << ": " << r.message;
      EXPECT_TRUE(matches_reference(steps[s], pass.download())) << "step " << s;
    }
  }
  CANOPY_TEST_CUDA(cudaStreamDestroy(stream));
}

TEST_F(gpu_resident_pass, set_tree_on_a_host_trees_runner_is_refused) {
  const ct::octree tree = ct::build_complete_octree(2, 4, 1);
  ct::upward_runner pass(tree, ct::upward_options{ct::pass_backend::gpu, ct::pass_tasks::node, {}});
  const ct::device_octree d(tree);
  ct::device_payloads<float> payloads(d.node_count());
  EXPECT_THROW(pass.set_tree(d, payloads), std::logic_error);
  const std::vector<ct::point> points = ct::generate_uniform(100, 3);
  const canopy::device_buffer<ct::point> d_points(points);
  ct::device_octree_builder builder;
  const ct::built_device_octree built = builder.build(d_points.data(), points.size(), build);
  ct::device_payloads<float> built_payloads(built.tree.node_count());
  EXPECT_THROW(pass.set_tree(built, built_payloads), std::logic_error);
}

}  // namespace
