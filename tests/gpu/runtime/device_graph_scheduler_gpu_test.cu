// SPDX-License-Identifier: Apache-2.0
// gpu_scheduler over task graphs built on the device (device_task_graph): a run is exact, the
// scheduler switches to other trees with set_graph (smaller, larger: the buffers grow) in stream
// order with no host copy of the tree, a timeout names a stuck task from a graph the host never
// had, and a graph without a root is refused.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "canopy/cuda/device_buffer.hpp"
#include "canopy/device_task_graph.cuh"
#include "canopy/gpu_scheduler.cuh"
#include "gpu_backend.cuh"
#include "gpu_test.hpp"
#include "scheduler_test_graphs.hpp"

namespace {

using canopy::device_buffer;
using canopy::device_task_graph;
using canopy::task_graph;
using canopy::task_id;
using GpuTest = canopy::test::gpu_test;

struct tree_case {
  std::vector<task_id> parent;
  task_graph host;
  device_buffer<task_id> d_parent;
  explicit tree_case(std::vector<task_id> p)
      : parent(std::move(p)), host(task_graph::from_parents(parent)), d_parent(parent) {}
};

TEST_F(GpuTest, DeviceGraphRunsAreExactAcrossSetGraph) {
  for (const canopy::mode m : {canopy::mode::continuation, canopy::mode::lockfree, canopy::mode::mutex}) {
    SCOPED_TRACE(std::string("mode ") + std::string(canopy::to_string(m)));
    cudaStream_t stream;
    CANOPY_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    // The first tree, a smaller one (buffers kept), a much larger one (buffers and queues grow),
    // and the first again.
    std::vector<tree_case> trees;
    trees.emplace_back(canopy::testing::random_tree_parents(30000, 31));
    trees.emplace_back(canopy::testing::random_tree_parents(4000, 32, 8));
    trees.emplace_back(canopy::testing::random_tree_parents(200000, 33));
    canopy::scheduler_options o;
    o.mode = m;
    o.deadline = std::chrono::seconds(20);
    std::unique_ptr<canopy::gpu_scheduler> sched;
    for (const int k : {0, 1, 2, 0}) {
      SCOPED_TRACE("tree " + std::to_string(k));
      tree_case& t = trees[static_cast<std::size_t>(k)];
      const device_task_graph g = device_task_graph::from_parents(t.d_parent.data(), t.host.task_count(), stream);
      if (!sched) sched = std::make_unique<canopy::gpu_scheduler>(g, o, stream);
      else sched->set_graph(g, stream);
      canopy::test::gpu_backend::workspace w(t.host);
      const auto expect = canopy::test::serial_sums(t.host);
      for (int run = 0; run < 3; ++run) {
        const canopy::run_result r = sched->run_async(w.ops(stream), stream).wait();
        ASSERT_TRUE(r.ok()) << "run " << run << ": " << r.message;
        const std::string e = canopy::test::exact_run_errors(w.read(), expect);
        ASSERT_EQ(e, "") << "run " << run;
      }
    }
    sched.reset();
    CANOPY_TEST_CUDA(cudaStreamDestroy(stream));
  }
}

// A scheduler made from a host DAG and switched to a device tree with set_graph kept the DAG's
// successor lists, and the kernel read the tree as that DAG (wrong values or a timeout). Each mode
// with dependency counters, and a tree_only Ops refused on the DAG first.
struct tree_only_ops {
  static constexpr bool tree_only = true;
  __device__ void operator()(task_id) const {}
};

TEST_F(GpuTest, SetGraphFromADagToADeviceTreeRunsTheTree) {
  for (const canopy::mode m : {canopy::mode::lockfree_tree, canopy::mode::lockfree, canopy::mode::continuation}) {
    SCOPED_TRACE(std::string("mode ") + std::string(canopy::to_string(m)));
    const task_graph dag = task_graph::from_edges(3000, canopy::testing::random_dag_edges(3000, 4, 11));
    canopy::scheduler_options o;
    o.mode = m;
    o.deadline = std::chrono::seconds(10);
    canopy::gpu_scheduler sched(dag, o);
    // run() reports the refusal; run_async() throws it, before enqueueing anything.
    const canopy::run_result refused = sched.run(tree_only_ops{});
    EXPECT_EQ(refused.code, canopy::status::invalid_argument);
    EXPECT_NE(refused.message.find("tree_only"), std::string::npos) << refused.message;
    EXPECT_THROW((void)sched.run_async(tree_only_ops{}), canopy::error);
    tree_case t(canopy::testing::random_tree_parents(20000, 12));
    sched.set_graph(device_task_graph::from_parents(t.d_parent.data(), t.host.task_count()));
    canopy::test::gpu_backend::workspace w(t.host);
    const auto expect = canopy::test::serial_sums(t.host);
    for (int run = 0; run < 2; ++run) {
      const canopy::run_result r = sched.run(w.ops());
      ASSERT_TRUE(r.ok()) << "run " << run << ": " << r.message;
      ASSERT_EQ(canopy::test::exact_run_errors(w.read(), expect), "") << "run " << run;
    }
    EXPECT_TRUE(sched.run(tree_only_ops{}).ok());
  }
}

__device__ inline std::uint64_t now_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Every task is a no-op except `victim`, which sleeps past the deadline.
struct stall_ops {
  task_id victim;
  std::uint64_t sleep_ns;
  __device__ void operator()(task_id t) const {
    if (t != victim) return;
    const std::uint64_t until = now_ns() + sleep_ns;
    while (now_ns() < until) __nanosleep(1000);
  }
};

// A root, 100 internal nodes and 10,000 leaves (100 under each). One leaf sleeps past the deadline:
// the run times out, and the task it names must be one that never became ready, i.e. the root or
// an internal node, never a leaf (a source is ready from the start). Which internal node depends on
// the mode: a block that runs the sleeper holds back its batch-mates' arrivals too.
TEST_F(GpuTest, TimeoutOnADeviceGraphNamesATaskThatNeverBecameReady) {
  std::vector<task_id> parent(10101);
  parent[0] = canopy::no_task;
  for (int i = 1; i <= 100; ++i) parent[static_cast<std::size_t>(i)] = 0;
  for (int j = 0; j < 10000; ++j) parent[static_cast<std::size_t>(101 + j)] = 1 + j / 100;
  const tree_case t(parent);
  const device_task_graph g = device_task_graph::from_parents(t.d_parent.data(), t.host.task_count());
  for (const canopy::mode m : {canopy::mode::lockfree, canopy::mode::continuation}) {
    SCOPED_TRACE(std::string("mode ") + std::string(canopy::to_string(m)));
    canopy::scheduler_options o;
    o.deadline = std::chrono::milliseconds(200);
    o.mode = m;
    canopy::gpu_scheduler sched(g, o);
    const canopy::run_result r = sched.run(stall_ops{5150, 600'000'000ull});
    ASSERT_EQ(r.code, canopy::status::timeout) << r.message;
    if (r.task == canopy::no_task) {
      // Continuation: the sleeper, once awake, may run its chain to the root before the run stops.
      EXPECT_NE(r.message.find("every task had finished"), std::string::npos) << r.message;
    } else {
      EXPECT_GE(r.task, 0) << r.message;
      EXPECT_LE(r.task, 100) << "a leaf was named: " << r.message;
      EXPECT_NE(r.message.find("task " + std::to_string(r.task) + " never became ready"), std::string::npos) << r.message;
    }
    // The next run (no stall) resets what the timeout left and is complete.
    const canopy::run_result again = sched.run(stall_ops{canopy::no_task, 0});
    EXPECT_TRUE(again.ok()) << again.message;
  }
}

TEST_F(GpuTest, ADeviceGraphWithoutARootIsRefused) {
  // 0 -> 1 -> 0: a cycle the caller vouched was a forest.
  const device_buffer<task_id> parent(std::vector<task_id>{1, 0});
  canopy::device_graph_options go;
  go.cycles = canopy::cycle_check::never;
  const device_task_graph g = device_task_graph::from_parents(parent.data(), 2, nullptr, nullptr, -1, go);
  ASSERT_EQ(g.sink_count(), 0);
  try {
    canopy::gpu_scheduler sched(g, canopy::scheduler_options{});
    FAIL() << "a graph without a root was accepted";
  } catch (const canopy::error& e) {
    EXPECT_EQ(e.code(), canopy::status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("no root"), std::string::npos) << e.what();
  }
}

// A trusted graph (from_trusted_forest) is complete only in its build stream's order: a scheduler
// made from it on another stream must wait for the copies. The build stream is held by a host
// function until a second thread opens it, 300 ms after the scheduler's constructor was entered;
// without the wait the scheduler would copy arrays the build has not yet written.
TEST_F(GpuTest, SchedulerWaitsForATrustedGraphBuiltOnAnotherStream) {
  tree_case t(canopy::testing::random_tree_parents(20000, 41));
  const device_buffer<std::int32_t> deps(t.host.dependency_count());
  const device_buffer<task_id> sources(t.host.sources());
  cudaStream_t build = nullptr;
  CANOPY_TEST_CUDA(cudaStreamCreateWithFlags(&build, cudaStreamNonBlocking));
  std::atomic<bool> open{false};
  CANOPY_TEST_CUDA(cudaLaunchHostFunc(
      build,
      [](void* p) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!static_cast<std::atomic<bool>*>(p)->load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      },
      &open));
  const device_task_graph g = device_task_graph::from_trusted_forest(
      t.d_parent.data(), deps.data(), t.host.task_count(), sources.data(), static_cast<std::int32_t>(t.host.sources().size()),
      t.host.sink_count(), build);
  ASSERT_NE(g.ready_event(), nullptr);
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    open = true;
  });
  canopy::scheduler_options o;
  o.deadline = std::chrono::seconds(20);
  canopy::gpu_scheduler sched(g, o);  // the legacy stream: not ordered after `build` by itself
  opener.join();
  canopy::test::gpu_backend::workspace w(t.host);
  const canopy::run_result r = sched.run(w.ops(nullptr));
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(canopy::test::exact_run_errors(w.read(), canopy::test::serial_sums(t.host)), "");
  // download() waits for the copies too.
  EXPECT_EQ(g.download().parent(), t.host.parent());
  CANOPY_TEST_CUDA(cudaStreamDestroy(build));
}

}  // namespace
