// SPDX-License-Identifier: Apache-2.0
// canopy::device_task_graph: graphs built by kernels from device arrays must equal, element for
// element, what task_graph::from_parents builds on the host from the same forest; bad input must be
// refused with one line naming the smallest bad task.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "canopy/device_task_graph.cuh"
#include "canopy/task_graph.hpp"
#include "child_arrays.hpp"
#include "gpu_test.hpp"
#include "scheduler_test_graphs.hpp"

namespace {

using canopy::cycle_check;
using canopy::device_buffer;
using canopy::device_task_graph;
using canopy::no_task;
using canopy::task_graph;
using canopy::task_id;

class DeviceTaskGraph : public canopy::test::gpu_test {};

template <class T>
std::vector<T> to_host(const T* d, std::int64_t n) {
  std::vector<T> h(static_cast<std::size_t>(n));
  if (n > 0) CANOPY_CUDA_TRY(cudaMemcpy(h.data(), d, h.size() * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// One line for a mismatch, not a dump of a million elements.
template <class T>
::testing::AssertionResult same_array(const char* name, const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << name << ": " << got.size() << " elements, want " << want.size();
  const auto d = std::mismatch(got.begin(), got.end(), want.begin());
  if (d.first != got.end())
    return ::testing::AssertionFailure() << name << "[" << (d.first - got.begin()) << "] = " << *d.first << ", want " << *d.second;
  return ::testing::AssertionSuccess();
}

void expect_matches(const device_task_graph& d, const task_graph& h) {
  ASSERT_EQ(d.task_count(), h.task_count());
  EXPECT_TRUE(d.is_tree());
  EXPECT_EQ(d.sink_count(), h.sink_count());
  ASSERT_EQ(d.source_count(), static_cast<std::int32_t>(h.sources().size()));
  EXPECT_TRUE(same_array("parent", to_host(d.parent(), d.task_count()), h.parent()));
  EXPECT_TRUE(same_array("dependency_count", to_host(d.dependency_count(), d.task_count()), h.dependency_count()));
  EXPECT_TRUE(same_array("sources", to_host(d.sources(), d.source_count()), h.sources()));

  std::int32_t* const pending = reinterpret_cast<std::int32_t*>(std::uintptr_t{0x1000});  // only passed through
  const canopy::task_graph_ref r = d.ref(pending);
  EXPECT_EQ(r.task_count, d.task_count());
  EXPECT_EQ(r.parent, d.parent());
  EXPECT_EQ(r.succ_offsets, nullptr);  // the tree form
  EXPECT_EQ(r.succ, nullptr);
  EXPECT_EQ(r.dependency_count, d.dependency_count());
  EXPECT_EQ(r.pending, pending);
  EXPECT_EQ(r.sources, d.sources());
  EXPECT_EQ(r.source_count, d.source_count());
  EXPECT_EQ(r.sink_count, d.sink_count());

  const task_graph back = d.download();
  EXPECT_TRUE(back.is_tree());
  EXPECT_EQ(back.sink_count(), h.sink_count());
  EXPECT_TRUE(same_array("download().parent", back.parent(), h.parent()));
  EXPECT_TRUE(same_array("download().dependency_count", back.dependency_count(), h.dependency_count()));
  EXPECT_TRUE(same_array("download().sources", back.sources(), h.sources()));
}

device_task_graph device_from_parents(const std::vector<task_id>& parent, const std::vector<task_id>* order = nullptr,
                                      canopy::device_graph_options options = {}, cudaStream_t stream = nullptr) {
  const device_buffer<task_id> d_parent(parent);
  if (order == nullptr)
    return device_task_graph::from_parents(d_parent.data(), static_cast<std::int32_t>(parent.size()), stream, nullptr, -1, options);
  const device_buffer<task_id> d_order(*order);
  return device_task_graph::from_parents(d_parent.data(), static_cast<std::int32_t>(parent.size()), stream, d_order.data(),
                                         static_cast<std::int32_t>(order->size()), options);
}

device_task_graph device_from_children(const canopy::testing::child_arrays& a, const std::vector<task_id>* order = nullptr,
                                       canopy::device_graph_options options = {}, cudaStream_t stream = nullptr) {
  const device_buffer<std::int32_t> first(a.first_child), count(a.child_count);
  const auto n = static_cast<std::int32_t>(a.child_count.size());
  if (order == nullptr) return device_task_graph::from_children(first.data(), count.data(), n, stream, nullptr, -1, options);
  const device_buffer<task_id> d_order(*order);
  return device_task_graph::from_children(first.data(), count.data(), n, stream, d_order.data(),
                                          static_cast<std::int32_t>(order->size()), options);
}

// The leaves of `h` in a random order: a caller-chosen sources order.
std::vector<task_id> shuffled_sources(const task_graph& h, std::uint64_t seed) {
  std::vector<task_id> s = h.sources();
  std::shuffle(s.begin(), s.end(), std::mt19937_64(seed));
  return s;
}

// The message of the canopy::error that `f` throws, or a note that it threw none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const canopy::error& e) {
    EXPECT_EQ(e.code(), canopy::status::invalid_argument) << e.what();
    return e.what();
  }
  return "(no error)";
}

const std::int32_t sizes[] = {1, 2, 7, 32, 33, 255, 257, 5000, (1 << 18) + 3};

TEST_F(DeviceTaskGraph, RandomTreesFromParentsMatchTheHostGraph) {
  std::uint64_t seed = 1;
  for (const std::int32_t n : sizes)
    for (const int window : {0, 3}) {
      // Parents below their children (the ids prove acyclicity), then relabelled (the check runs).
      const auto ordered = canopy::testing::random_tree_parents(n, seed++, window);
      for (const auto& parent : {ordered, canopy::testing::shuffle_ids(ordered, seed++)})
        for (const cycle_check c : {cycle_check::automatic, cycle_check::always, cycle_check::never}) {
          SCOPED_TRACE("n=" + std::to_string(n) + " window=" + std::to_string(window) + " check=" + std::to_string(int(c)));
          const task_graph h = task_graph::from_parents(parent);
          expect_matches(device_from_parents(parent, nullptr, {c, nullptr}), h);
        }
    }
}

TEST_F(DeviceTaskGraph, RandomForestsWithACallersSourcesOrder) {
  std::uint64_t seed = 100;
  for (const std::int32_t n : sizes) {
    const auto tree = canopy::testing::random_tree_parents(n, seed++);
    auto parent = canopy::testing::shuffle_ids(tree, seed++);
    std::mt19937_64 rng(seed++);
    for (auto& p : parent)
      if (rng() % 16 == 0) p = no_task;  // a forest: more roots
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<task_id> order = shuffled_sources(task_graph::from_parents(parent), seed++);
    const task_graph h = task_graph::from_parents(parent, order);
    expect_matches(device_from_parents(parent, &order), h);
  }
}

TEST_F(DeviceTaskGraph, OctreeLikeChildArraysMatchTheHostGraph) {
  std::uint64_t seed = 200;
  for (const std::int32_t n : sizes)
    for (const int max_children : {1, 2, 8, 40})
      for (const std::int32_t roots : {1, 5})
        for (const bool shuffle : {false, true}) {
          SCOPED_TRACE("n=" + std::to_string(n) + " max_children=" + std::to_string(max_children) + " roots=" +
                       std::to_string(roots) + " shuffled=" + std::to_string(shuffle));
          const auto a = canopy::testing::random_child_arrays(n, seed++, max_children, roots, shuffle);
          const task_graph h = task_graph::from_parents(a.parent);
          expect_matches(device_from_children(a), h);
          expect_matches(device_from_children(a, nullptr, {cycle_check::always, nullptr}), h);
          const std::vector<task_id> order = shuffled_sources(h, seed++);
          expect_matches(device_from_children(a, &order), task_graph::from_parents(a.parent, order));
        }
}

TEST_F(DeviceTaskGraph, AStarFromChildrenAndFromParents) {
  // One task with every other as its child: the widest fan-out (one child range of n - 1).
  const std::int32_t n = 100003;
  canopy::testing::child_arrays a;
  a.first_child.assign(n, -1);
  a.child_count.assign(n, 0);
  a.parent.assign(n, 0);
  a.parent[0] = no_task;
  a.first_child[0] = 1;
  a.child_count[0] = n - 1;
  const task_graph h = task_graph::from_parents(a.parent);
  expect_matches(device_from_children(a), h);
  expect_matches(device_from_parents(a.parent), h);
}

TEST_F(DeviceTaskGraph, SingleTaskManyRootsAndNoTasks) {
  expect_matches(device_from_parents({no_task}), task_graph::from_parents(std::vector<task_id>{no_task}));
  const std::vector<task_id> roots(1000, no_task);  // every task a root and a leaf
  expect_matches(device_from_parents(roots), task_graph::from_parents(roots));
  canopy::testing::child_arrays leaves{std::vector<std::int32_t>(1000, -1), std::vector<std::int32_t>(1000, 0), roots};
  expect_matches(device_from_children(leaves), task_graph::from_parents(roots));

  const task_graph empty = task_graph::from_parents({});
  expect_matches(device_task_graph::from_parents(nullptr, 0), empty);
  expect_matches(device_task_graph::from_children(nullptr, nullptr, 0), empty);
  expect_matches(device_task_graph::from_children(nullptr, nullptr, 0, nullptr, nullptr, 0), empty);  // an empty order
  const device_task_graph none;
  EXPECT_EQ(none.task_count(), 0);
  EXPECT_EQ(none.parent(), nullptr);
  EXPECT_EQ(none.sources(), nullptr);
}

TEST_F(DeviceTaskGraph, MovedFromGraphIsEmpty) {
  device_task_graph a = device_from_parents(canopy::testing::random_tree_parents(100, 7));
  const task_id* parent = a.parent();
  device_task_graph b = std::move(a);
  EXPECT_EQ(b.task_count(), 100);
  EXPECT_EQ(b.parent(), parent);
  EXPECT_EQ(a.task_count(), 0);  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
  EXPECT_EQ(a.source_count(), 0);
  EXPECT_EQ(a.sink_count(), 0);
  EXPECT_EQ(a.parent(), nullptr);
}

TEST_F(DeviceTaskGraph, WorkspaceIsReusedAndAStreamIsHonoured) {
  cudaStream_t stream = nullptr;
  CANOPY_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  canopy::device_graph_workspace ws;
  const auto a = canopy::testing::random_child_arrays(50000, 9, 8, 1, true);
  const task_graph h = task_graph::from_parents(a.parent);
  expect_matches(device_from_children(a, nullptr, {cycle_check::automatic, &ws}, stream), h);
  const std::size_t held = ws.bytes();
  EXPECT_GT(held, 0u);
  for (int i = 0; i < 3; ++i) {
    expect_matches(device_from_children(a, nullptr, {cycle_check::automatic, &ws}, stream), h);
    expect_matches(device_from_parents(a.parent, nullptr, {cycle_check::always, &ws}, stream), h);
    EXPECT_EQ(ws.bytes(), held) << "a build no larger than the first must not grow the workspace";
  }
  CANOPY_TEST_CUDA(cudaStreamDestroy(stream));
}

TEST_F(DeviceTaskGraph, BadParentsAreRefusedNamingTheSmallestBadTask) {
  auto build = [](std::vector<task_id> parent) { return [parent] { device_from_parents(parent); }; };
  EXPECT_EQ(error_of(build({no_task, 0, 2, 0})), "device task graph: task 2 is its own parent");
  EXPECT_EQ(error_of(build({no_task, 0, 0, 7, 1})), "device task graph: task 3 has parent 7, out of range (5 tasks)");
  EXPECT_EQ(error_of(build({no_task, -2})), "device task graph: task 1 has parent -2, out of range (2 tasks)");
  // Many bad tasks, far apart (different blocks): the smallest is named, every time.
  std::vector<task_id> many = canopy::testing::random_tree_parents(100000, 3);
  many[70001] = 70001;
  many[40000] = 100000;
  many[99999] = -5;
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(error_of(build(many)), "device task graph: task 40000 has parent 100000, out of range (100000 tasks)");
}

TEST_F(DeviceTaskGraph, CyclesAreRefusedUnlessTheCallerVouches) {
  auto build = [](std::vector<task_id> parent, cycle_check c) {
    return [parent, c] { device_from_parents(parent, nullptr, {c, nullptr}); };
  };
  EXPECT_EQ(error_of(build({no_task, 2, 3, 1}, cycle_check::automatic)), "device task graph: cycle 1 -> 2 -> 3 -> 1");
  EXPECT_EQ(error_of(build({1, 0}, cycle_check::automatic)), "device task graph: cycle 0 -> 1 -> 0");
  EXPECT_EQ(error_of(build({no_task, 2, 3, 2}, cycle_check::always)),
            "device task graph: cycle 2 -> 3 -> 2 (task 1 leads into it and never reaches a root)");
  // A large forest with one small cycle far from task 0.
  std::vector<task_id> big = canopy::testing::shuffle_ids(canopy::testing::random_tree_parents(200000, 11), 12);
  big[150000] = 150001;
  big[150001] = 150002;
  big[150002] = 150000;
  const std::string what = error_of(build(big, cycle_check::automatic));
  EXPECT_NE(what.find("cycle 150000 -> 150001 -> 150002 -> 150000"), std::string::npos) << what;
  // cycle_check::never builds what it is given (the documented promise: the caller vouches).
  EXPECT_EQ(error_of(build({no_task, 2, 3, 1}, cycle_check::never)), "(no error)");
}

TEST_F(DeviceTaskGraph, BadChildRangesAreRefused) {
  auto build = [](std::vector<std::int32_t> first, std::vector<std::int32_t> count) {
    return [first, count] {
      canopy::testing::child_arrays a{first, count, {}};
      device_from_children(a);
    };
  };
  EXPECT_EQ(error_of(build({1, -1, -1}, {-2, 0, 0})), "device task graph: task 0 has child_count -2");
  EXPECT_EQ(error_of(build({1, -1, -1}, {3, 0, 0})),
            "device task graph: task 0 has children 1..3 (first_child 1, child_count 3), out of range (3 tasks)");
  EXPECT_EQ(error_of(build({1, 0, -1}, {2, 2, 0})), "device task graph: task 1 is its own child (children 0..1)");
  EXPECT_EQ(error_of(build({2, 2, -1, -1}, {2, 1, 0, 0})), "device task graph: task 2 is a child of both task 0 and task 1");
  // Half the tasks all claim the other half: 2.5e9 child slots, of which the pass visits n + 1
  // (slots_to_visit), enough to catch the overlap: slot n is task 2's first, so child 50000 has
  // parents 0, 1 and 2, and the message names the smallest and the largest.
  const std::int32_t n = 100000;
  std::vector<std::int32_t> first(n, n / 2), count(n, 0);
  for (std::int32_t t = 0; t < n / 2; ++t) count[t] = n / 2;
  EXPECT_EQ(error_of(build(first, count)), "device task graph: task 50000 is a child of both task 0 and task 2");
  // A cycle through child ranges: 0 and 1 each the other's child, task 2 a root.
  EXPECT_EQ(error_of(build({1, 0, -1}, {1, 1, 0})), "device task graph: cycle 0 -> 1 -> 0");
  EXPECT_EQ(error_of([] { device_task_graph::from_children(nullptr, nullptr, 3); }),
            "device task graph: null first_child or child_count array for 3 tasks");
  EXPECT_EQ(error_of([] { device_task_graph::from_parents(nullptr, 3); }), "device task graph: null parent array for 3 tasks");
  EXPECT_EQ(error_of([] { device_task_graph::from_parents(nullptr, -1); }), "device task graph: negative task count -1");
}

TEST_F(DeviceTaskGraph, BadSourcesOrdersAreRefused) {
  const std::vector<task_id> parent = {no_task, 0, 0, 1, 1};  // leaves 2, 3, 4
  auto build = [&parent](std::vector<task_id> order) { return [&parent, order] { device_from_parents(parent, &order); }; };
  EXPECT_EQ(error_of(build({3, 4, 2})), "(no error)");
  EXPECT_EQ(error_of(build({3, 9, 2})), "device task graph: sources_order[1] = 9 is not a task (5 tasks)");
  EXPECT_EQ(error_of(build({3, 4, 1})),
            "device task graph: sources_order[2] = task 1, which has 2 children (the sources are the tasks without children)");
  EXPECT_EQ(error_of(build({3, 4, 3})), "device task graph: sources_order[2] = task 3 repeats sources_order[0]");
  EXPECT_EQ(error_of(build({3, 4})), "device task graph: sources_order has 2 entries, but 3 tasks have no children");
  EXPECT_EQ(error_of(build({})), "device task graph: sources_order has 0 entries, but 3 tasks have no children");
  // Ids that do not prove acyclicity: the cycle check runs after the order check, on the same
  // scratch, and the message must still name the first index of the repeated entry.
  const std::vector<task_id> mixed = {2, 2, no_task, 0, 0};  // leaves 1, 3, 4
  const std::vector<task_id> repeat = {4, 3, 4};
  EXPECT_EQ(error_of([&] { device_from_parents(mixed, &repeat); }),
            "device task graph: sources_order[2] = task 4 repeats sources_order[0]");
  // A bad order loses to a cycle.
  EXPECT_EQ(error_of([] {
              const std::vector<task_id> cyclic = {no_task, 2, 3, 1};
              const std::vector<task_id> order = {1};
              device_from_parents(cyclic, &order);
            }),
            "device task graph: cycle 1 -> 2 -> 3 -> 1");
  // No tasks, yet an order.
  const std::vector<task_id> none;
  const std::vector<task_id> two = {0, 1};
  EXPECT_EQ(error_of([&] { device_from_parents(none, &two); }), "device task graph: sources_order[0] = 0 is not a task (0 tasks)");
  // A bad graph is reported before a bad order.
  const std::vector<task_id> bad = {no_task, 0, 7, 1, 1};
  const std::vector<task_id> order = {9, 9};
  EXPECT_EQ(error_of([&] { device_from_parents(bad, &order); }), "device task graph: task 2 has parent 7, out of range (5 tasks)");
  const device_buffer<task_id> d_parent(parent);
  EXPECT_EQ(error_of([&] { device_task_graph::from_parents(d_parent.data(), 5, nullptr, d_parent.data(), -1); }),
            "device task graph: sources_order given with a negative source_count");
  EXPECT_EQ(error_of([&] { device_task_graph::from_parents(d_parent.data(), 5, nullptr, nullptr, 3); }),
            "device task graph: source_count 3 given without sources_order");
}

}  // namespace
