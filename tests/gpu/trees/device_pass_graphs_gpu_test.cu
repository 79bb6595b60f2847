// SPDX-License-Identifier: Apache-2.0
// The octree's task graphs built on the device (canopy/passes/device_pass_graphs.cuh) must equal,
// element for element, make_upward_graph and make_twig_graph of the same tree: parents,
// dependency counts, sources in order, twig tasks, twig count. Trees uploaded from the host and
// trees built by the GPU builder. Label `gpu`.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "canopy/cuda/device_buffer.hpp"
#include "canopy/passes/device_octree.cuh"
#include "canopy/passes/device_octree_builder.cuh"
#include "canopy/passes/device_pass_graphs.cuh"
#include "canopy/passes/twig_pass.hpp"
#include "canopy/passes/upward_pass.hpp"
#include "canopy/trees/generators.hpp"
#include "gpu_test.hpp"

namespace {
namespace ct = canopy::trees;

class device_pass_graphs : public canopy::test::gpu_test {};

template <class T>
std::vector<T> to_host(const T* d, std::int64_t n) {
  std::vector<T> h(static_cast<std::size_t>(n));
  if (n > 0) CANOPY_CUDA_TRY(cudaMemcpy(h.data(), d, h.size() * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

bool operator==(const ct::twig_task& a, const ct::twig_task& b) {
  return a.entry == b.entry && a.first_child == b.first_child && a.child_count == b.child_count && a.leaf_mask == b.leaf_mask;
}

template <class T>
::testing::AssertionResult same(const char* what, const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << what << ": " << got.size() << " entries, want " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i])) return ::testing::AssertionFailure() << what << "[" << i << "] differs";
  return ::testing::AssertionSuccess();
}

void expect_graph(const canopy::device_task_graph& d, const canopy::task_graph& h) {
  ASSERT_EQ(d.task_count(), h.task_count());
  EXPECT_EQ(d.sink_count(), h.sink_count());
  EXPECT_TRUE(same("parent", to_host(d.parent(), d.task_count()), h.parent()));
  EXPECT_TRUE(same("dependency_count", to_host(d.dependency_count(), d.task_count()), h.dependency_count()));
  EXPECT_TRUE(same("sources", to_host(d.sources(), d.source_count()), h.sources()));
}

void expect_both(const ct::octree& host, const ct::octree_ref& dev, canopy::device_graph_workspace* ws) {
  expect_graph(ct::make_device_upward_graph(dev, nullptr, ws), ct::make_upward_graph(host));
  const ct::twig_graph want = ct::make_twig_graph(host);
  const ct::device_twig_graph got = ct::make_device_twig_graph(dev, nullptr, ws);
  expect_graph(got.graph, want.graph);
  EXPECT_EQ(got.twig_count, want.twig_count);
  EXPECT_TRUE(same("tasks", got.tasks.download(), want.tasks));
}

TEST_F(device_pass_graphs, trees_uploaded_from_the_host) {
  canopy::device_graph_workspace ws;
  std::vector<ct::octree> trees;
  trees.push_back(ct::build_complete_octree(0, 8, 1));  // the root alone: one leaf task
  trees.push_back(ct::build_complete_octree(1, 8, 1));  // the root is a twig
  trees.push_back(ct::build_complete_octree(4, 8, 2));
  trees.push_back(ct::build_octree(ct::generate_plummer(100000, 3), {16, 21}));
  trees.push_back(ct::build_octree(ct::generate_uniform(50000, 4), {1, 21}));
  trees.push_back(ct::build_octree(std::vector<ct::point>(100, ct::point{0.5f, 0.5f, 0.5f, 1.0f}), {4, 6}));  // identical points
  for (std::size_t i = 0; i < trees.size(); ++i) {
    SCOPED_TRACE("tree " + std::to_string(i));
    const ct::device_octree d(trees[i]);
    expect_both(trees[i], d.ref(), i % 2 == 0 ? &ws : nullptr);
  }
}

TEST_F(device_pass_graphs, trees_built_on_the_device) {
  canopy::device_graph_workspace ws;
  ct::device_octree_builder builder;
  for (const std::size_t n : {std::size_t{1}, std::size_t{777}, std::size_t{1000000}}) {
    SCOPED_TRACE("plummer " + std::to_string(n));
    const std::vector<ct::point> points = ct::generate_plummer(n, 9);
    const canopy::device_buffer<ct::point> d_points(points);
    ct::built_device_octree built;
    builder.build_into(d_points.data(), n, {32, 21}, built);
    CANOPY_TEST_CUDA(cudaDeviceSynchronize());
    const ct::octree host = ct::build_octree(points, {32, 21});
    expect_both(host, built.tree.ref(), &ws);
    expect_graph(ct::make_device_upward_graph(built), ct::make_upward_graph(host));  // the trusted path
  }
}

// The trusted path waits for nothing on the host: with the stream held by a host function until
// the call has returned, it must return (a host wait inside would never end; the host function
// gives up after 10 s and the test then fails instead of hanging). The graph is right afterwards.
TEST_F(device_pass_graphs, the_graph_of_a_built_tree_is_enqueued_without_a_host_wait) {
  const std::vector<ct::point> points = ct::generate_plummer(50000, 4);
  const canopy::device_buffer<ct::point> d_points(points);
  ct::device_octree_builder builder;
  ct::built_device_octree built;
  cudaStream_t stream = nullptr;
  CANOPY_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  builder.build_into(d_points.data(), points.size(), {16, 21}, built, stream);
  struct gate {
    std::atomic<bool> open{false};
    std::atomic<bool> gave_up{false};
  } g;
  CANOPY_TEST_CUDA(cudaLaunchHostFunc(
      stream,
      [](void* p) {
        auto* gp = static_cast<gate*>(p);
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!gp->open.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
        gp->gave_up = !gp->open.load();
      },
      &g));
  canopy::device_task_graph graph = ct::make_device_upward_graph(built, stream);
  g.open = true;  // only now may the stream go on
  CANOPY_TEST_CUDA(cudaStreamSynchronize(stream));
  EXPECT_FALSE(g.gave_up.load()) << "make_device_upward_graph(built) waited for the stream";
  expect_graph(graph, ct::make_upward_graph(ct::build_octree(points, {16, 21})));
  // Rebuilt into: a smaller tree reuses the arrays, a larger one grows them.
  for (const std::size_t n : {std::size_t{1000}, std::size_t{1}, std::size_t{200000}}) {
    SCOPED_TRACE("rebuilt into, " + std::to_string(n) + " points");
    const std::vector<ct::point> p = ct::generate_plummer(n, 5);
    const canopy::device_buffer<ct::point> dp(p);
    builder.build_into(dp.data(), n, {8, 21}, built, stream);
    ct::make_device_upward_graph(built, graph, stream);
    CANOPY_TEST_CUDA(cudaStreamSynchronize(stream));
    expect_graph(graph, ct::make_upward_graph(ct::build_octree(p, {8, 21})));
  }
  CANOPY_TEST_CUDA(cudaStreamDestroy(stream));
}

TEST_F(device_pass_graphs, a_trusted_forest_refuses_impossible_counts_and_null_arrays) {
  const canopy::device_buffer<std::int32_t> a(std::vector<std::int32_t>{-1, 0, 0});
  const canopy::device_buffer<std::int32_t> deps(std::vector<std::int32_t>{2, 0, 0});
  const canopy::device_buffer<std::int32_t> src(std::vector<std::int32_t>{1, 2});
  using G = canopy::device_task_graph;
  EXPECT_EQ(G::from_trusted_forest(a.data(), deps.data(), 3, src.data(), 2, 1).source_count(), 2);
  EXPECT_EQ(G::from_trusted_forest(nullptr, nullptr, 0, nullptr, 0, 0).task_count(), 0);
  EXPECT_THROW((void)G::from_trusted_forest(a.data(), deps.data(), -1, src.data(), 2, 1), canopy::error);
  EXPECT_THROW((void)G::from_trusted_forest(a.data(), deps.data(), 3, src.data(), 4, 1), canopy::error);
  EXPECT_THROW((void)G::from_trusted_forest(a.data(), deps.data(), 3, src.data(), 0, 1), canopy::error);
  EXPECT_THROW((void)G::from_trusted_forest(a.data(), deps.data(), 3, src.data(), 2, 0), canopy::error);
  EXPECT_THROW((void)G::from_trusted_forest(a.data(), nullptr, 3, src.data(), 2, 1), canopy::error);
  EXPECT_THROW((void)G::from_trusted_forest(a.data(), deps.data(), 3, nullptr, 2, 1), canopy::error);
}

TEST_F(device_pass_graphs, an_empty_tree_gives_an_empty_graph_and_null_arrays_are_refused) {
  const ct::octree_ref empty{};
  EXPECT_EQ(ct::make_device_upward_graph(empty).task_count(), 0);
  EXPECT_EQ(ct::make_device_twig_graph(empty).graph.task_count(), 0);
  ct::octree_ref bad{};
  bad.node_count = 5;
  bad.leaf_count = 4;
  EXPECT_THROW((void)ct::make_device_twig_graph(bad), std::invalid_argument);
  EXPECT_THROW((void)ct::make_device_upward_graph(bad), std::invalid_argument);
}

}  // namespace
