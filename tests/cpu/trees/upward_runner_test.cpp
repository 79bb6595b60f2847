// SPDX-License-Identifier: Apache-2.0
// upward_runner (canopy/passes/upward_runner.hpp) on the cpu backend: each task kind against the
// double reference over complete and adaptive trees, mode changes between runs, poison and the
// payload accessors, the names of the kinds and backends, and the gpu backend's errors without a
// device or without CUDA.
#include <canopy/cuda/device.hpp>
#include <canopy/passes/upward_runner.hpp>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/reference.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace {
namespace ct = canopy::trees;

ct::upward_options cpu_options(ct::pass_tasks tasks, canopy::mode m = canopy::mode::continuation) {
  ct::upward_options o{ct::pass_backend::cpu, tasks, {}};
  o.scheduler.mode = m;
  o.scheduler.blocks = 2;
  return o;
}

TEST(upward_runner, every_kind_matches_the_reference) {
  const std::vector<ct::octree> trees = {ct::build_complete_octree(0, 3, 1), ct::build_complete_octree(3, 8, 2),
                                         ct::build_octree(ct::generate_plummer(5000, 3), {8, 21}),
                                         ct::build_octree({})};
  for (const ct::octree& tree : trees) {
    const auto ref = ct::reference_upward_pass(tree);
    for (const ct::pass_tasks kind : ct::all_pass_tasks) {
      ct::upward_runner pass(tree, cpu_options(kind));
      EXPECT_EQ(pass.backend(), ct::pass_backend::cpu);
      EXPECT_EQ(pass.tasks(), kind);
      const canopy::run_result r = pass.run();
      ASSERT_TRUE(r.ok()) << r.message;
      const auto c = ct::compare_payloads<float>(tree, pass.download(), ref);
      EXPECT_TRUE(c.within_tolerance) << ct::to_string(kind) << ": " << c.summary();
      EXPECT_EQ(pass.host_payloads().size(), static_cast<std::size_t>(tree.node_count()));
    }
  }
}

TEST(upward_runner, mode_changes_between_runs_and_poison_is_overwritten) {
  const ct::octree tree = ct::build_complete_octree(3, 4, 5);
  const auto ref = ct::reference_upward_pass(tree);
  for (const ct::pass_tasks kind : ct::all_pass_tasks) {
    ct::upward_runner pass(tree, cpu_options(kind));
    for (const canopy::mode m : canopy::all_modes) {
      pass.set_mode(m);
      EXPECT_EQ(pass.options().mode, m);
      pass.poison();
      EXPECT_TRUE(std::isnan(pass.download().front().mass));  // 0xff bytes: NaN
      const ct::timed_run t = pass.run_timed();
      ASSERT_TRUE(t.result.ok()) << canopy::to_string(m) << ": " << t.result.message;
      EXPECT_GE(t.elapsed_us, 0);
      EXPECT_TRUE(ct::compare_payloads<float>(tree, pass.download(), ref).within_tolerance) << canopy::to_string(m);
    }
  }
}

TEST(upward_runner, describes_its_configuration) {
  const ct::octree tree = ct::build_complete_octree(2, 8, 1);
  ct::upward_runner pass(tree, cpu_options(ct::pass_tasks::twig));
  EXPECT_EQ(pass.grid(), 2);
  EXPECT_EQ(pass.lanes(), 1);
  EXPECT_EQ(pass.describe(), "2 CPU workers, twig tasks");
  EXPECT_THROW((void)pass.device_tree(), std::logic_error);
  EXPECT_THROW((void)pass.device_payloads_data(), std::logic_error);
}

TEST(upward_runner, names_round_trip) {
  for (const ct::pass_tasks t : ct::all_pass_tasks) EXPECT_EQ(ct::parse_pass_tasks(ct::to_string(t)), t);
  for (const ct::pass_backend b : ct::all_pass_backends) EXPECT_EQ(ct::parse_pass_backend(ct::to_string(b)), b);
  EXPECT_FALSE(ct::parse_pass_tasks("leaf"));
  EXPECT_FALSE(ct::parse_pass_backend("quantum"));
  EXPECT_EQ(ct::default_pass_tasks(ct::pass_backend::gpu), ct::pass_tasks::twig);
  EXPECT_EQ(ct::default_pass_tasks(ct::pass_backend::cpu), ct::pass_tasks::node);
}

TEST(upward_runner, bad_options_are_typed_errors) {
  const ct::octree tree = ct::build_complete_octree(1, 1, 1);
  ct::upward_options o = cpu_options(ct::pass_tasks::node);
  o.scheduler.blocks = -1;
  EXPECT_THROW(ct::upward_runner(tree, o), canopy::error);
}

TEST(upward_runner, gpu_backend_without_a_device_or_cuda_says_so) {
  const ct::octree tree = ct::build_complete_octree(1, 1, 1);
  ct::upward_options o = cpu_options(ct::pass_tasks::node);
  o.backend = ct::pass_backend::gpu;
  if (!ct::gpu_pass_built()) {
    try {
      ct::upward_runner pass(tree, o);
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("without CUDA"), std::string::npos) << e.what();
    }
  } else if (!canopy::gpu_available()) {
    EXPECT_THROW(ct::upward_runner(tree, o), canopy::cuda_error);  // the upload fails, typed
  }
}

}  // namespace
