// SPDX-License-Identifier: Apache-2.0
// The CPU backend: the scheduler contract (tests/common/scheduler_contract.inc) on std::thread
// workers, plus what only the CPU backend has. Built under ThreadSanitizer too: the oracle op reads
// its predecessors' values with plain loads, so a missing release/acquire is a reported race.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cpu_backend.hpp"

using backend = canopy::test::cpu_backend;
#include "scheduler_contract.inc"

CANOPY_INSTANTIATE_SCHEDULER_CONTRACT(cpu);

namespace {

// `blocks` is the worker count on the CPU; 0 means one per hardware thread (at least one).
TEST(CpuScheduler, BlocksAreWorkerThreads) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(100, 1));
  for (const int blocks : {1, 3, 8}) {
    canopy::scheduler_options o;
    o.blocks = blocks;
    EXPECT_EQ(canopy::cpu_scheduler(g, o).worker_count(), blocks);
  }
  EXPECT_EQ(canopy::cpu_scheduler(g, canopy::scheduler_options{}).worker_count(),
            static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

// Calls *f, declaring tree_only: the same operation through the code for Ops that run on trees
// only (warp-rounds' own loop).
template <class F>
struct tree_only_call {
  static constexpr bool tree_only = true;
  const F* f;
  void operator()(canopy::task_id t) const { (*f)(t); }
};

// An exception thrown by a task ended the process (std::terminate on the worker thread): it is a
// typed status naming the task, with what() in the message, and the same scheduler runs again.
TEST(CpuScheduler, ATaskThatThrowsIsATaskErrorAndTheSchedulerRunsAgain) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(500, 2));
  for (const canopy::mode m : canopy::all_modes) {
    canopy::scheduler_options o;
    o.mode = m;
    o.blocks = 3;
    canopy::cpu_scheduler s(g, o);
    std::atomic<bool> armed{true};
    std::vector<std::atomic<int>> runs(500);
    auto ops = [&](canopy::task_id t) {
      runs[static_cast<std::size_t>(t)].fetch_add(1);
      if (t == 123 && armed.load()) throw std::runtime_error("no room for node 123");
    };
    const canopy::run_result bad = s.run(ops);
    EXPECT_EQ(bad.code, canopy::status::task_error) << canopy::to_string(m);
    EXPECT_EQ(bad.task, 123) << canopy::to_string(m);
    EXPECT_NE(bad.message.find("task 123 threw: no room for node 123"), std::string::npos) << bad.message;
    armed.store(false);
    for (auto& r : runs) r.store(0);
    const canopy::run_result good = s.run(ops);
    EXPECT_TRUE(good.ok()) << canopy::to_string(m) << ": " << good.message;
    EXPECT_TRUE(std::all_of(runs.begin(), runs.end(), [](const std::atomic<int>& r) { return r.load() == 1; }))
        << canopy::to_string(m) << ": a task ran twice or never after the failed run";
    // The same through the code for Ops that declare tree_only (warp-rounds' own loop).
    armed.store(true);
    const canopy::run_result bad_tree = s.run(tree_only_call<decltype(ops)>{&ops});
    EXPECT_EQ(bad_tree.code, canopy::status::task_error) << canopy::to_string(m) << ", tree_only ops";
    EXPECT_EQ(bad_tree.task, 123) << canopy::to_string(m) << ", tree_only ops";
    armed.store(false);
    for (auto& r : runs) r.store(0);
    EXPECT_TRUE(s.run(tree_only_call<decltype(ops)>{&ops}).ok()) << canopy::to_string(m) << ", tree_only ops";
    EXPECT_TRUE(std::all_of(runs.begin(), runs.end(), [](const std::atomic<int>& r) { return r.load() == 1; }))
        << canopy::to_string(m) << ", tree_only ops: a task ran twice or never after the failed run";
  }
  // Not derived from std::exception: still a task_error, with a message that says so.
  canopy::cpu_scheduler s(g, canopy::scheduler_options{});
  const canopy::run_result r = s.run([](canopy::task_id t) {
    if (t == 7) throw 42;
  });
  EXPECT_EQ(r.code, canopy::status::task_error);
  EXPECT_NE(r.message.find("not derived from std::exception"), std::string::npos) << r.message;
}

// Nothing guarded run(): two threads running one scheduler shared its queues and counters. The
// second call is refused at once while the first is in progress, and the first is unaffected.
TEST(CpuScheduler, OneRunAtATimePerScheduler) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(200, 3));
  canopy::scheduler_options o;
  o.blocks = 2;
  canopy::cpu_scheduler s(g, o);
  std::atomic<bool> inside{false}, release{false};
  auto ops = [&](canopy::task_id t) {
    if (t == g.sources().front()) {
      inside.store(true);
      while (!release.load()) std::this_thread::yield();
    }
  };
  canopy::run_result first;
  std::thread runner([&] { first = s.run(ops); });
  while (!inside.load()) std::this_thread::yield();
  const canopy::run_result second = s.run([](canopy::task_id) {});
  release.store(true);
  runner.join();
  EXPECT_EQ(second.code, canopy::status::invalid_argument);
  EXPECT_NE(second.message.find("one run at a time"), std::string::npos) << second.message;
  EXPECT_TRUE(first.ok()) << first.message;
  EXPECT_TRUE(s.run([](canopy::task_id) {}).ok());  // and the scheduler is free again
}

// Ops that declare tree_only (canopy/detail/dependency.hpp) run on trees and are refused, with one
// clear message and no task run, on a DAG; Ops without it run on both.
struct tree_only_counting {
  static constexpr bool tree_only = true;
  std::atomic<int>* ran;
  void operator()(canopy::task_id) const { ran->fetch_add(1); }
};

TEST(CpuScheduler, TreeOnlyOpsRunOnTreesAndAreRefusedOnADag) {
  const auto tree = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(300, 5));
  const auto dag = canopy::task_graph::from_edges(300, canopy::testing::random_dag_edges(300, 3, 6));
  std::atomic<int> ran{0};
  EXPECT_TRUE(canopy::cpu_scheduler(tree, canopy::scheduler_options{}).run(tree_only_counting{&ran}).ok());
  EXPECT_EQ(ran.load(), 300);
  ran = 0;
  const canopy::run_result r = canopy::cpu_scheduler(dag, canopy::scheduler_options{}).run(tree_only_counting{&ran});
  EXPECT_EQ(r.code, canopy::status::invalid_argument);
  EXPECT_NE(r.message.find("tree_only"), std::string::npos) << r.message;
  EXPECT_EQ(ran.load(), 0);
  EXPECT_TRUE(canopy::cpu_scheduler(dag, canopy::scheduler_options{}).run([&](canopy::task_id) { ran.fetch_add(1); }).ok());
  EXPECT_EQ(ran.load(), 300);
}

// A run whose last task finished after the deadline had passed is complete, not late: the worker
// that checked the clock afterwards reported a timeout (the GPU kernel has had this guard).
TEST(CpuScheduler, ARunThatFinishesPastItsDeadlineIsNotATimeout) {
  const auto g = canopy::task_graph::from_parents(std::vector<canopy::task_id>{canopy::no_task});
  canopy::scheduler_options o;
  o.blocks = 1;
  o.deadline = std::chrono::milliseconds(5);
  canopy::cpu_scheduler s(g, o);
  const canopy::run_result r = s.run([](canopy::task_id) { std::this_thread::sleep_for(std::chrono::milliseconds(30)); });
  EXPECT_TRUE(r.ok()) << r.message;
}

// The deadline was checked only between batches and by idle workers, so a chain of tasks that
// continuation runs one after the other on one worker ran to its end however late. The worker
// now looks at the clock every detail::cpu_chain_check tasks of a chain (warp-rounds with tree_only
// Ops: every cpu_chain_check rounds of a climb): the run stops with a timeout long before the
// chain's end (counted, not timed).
TEST(CpuScheduler, ALongChainStillTimesOut) {
  constexpr int n = 3000;
  std::vector<canopy::task_id> parent(n);
  for (int t = 0; t < n; ++t) parent[static_cast<std::size_t>(t)] = t + 1 < n ? t + 1 : canopy::no_task;
  const auto g = canopy::task_graph::from_parents(parent);
  for (const canopy::mode m : {canopy::mode::continuation, canopy::mode::warp_rounds}) {
    canopy::scheduler_options o;
    o.mode = m;
    o.blocks = 1;
    o.deadline = std::chrono::milliseconds(20);
    canopy::cpu_scheduler s(g, o);
    std::atomic<int> ran{0};
    const auto sleepy = [&](canopy::task_id) {
      ran.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    };
    const canopy::run_result r = s.run(sleepy);
    EXPECT_EQ(r.code, canopy::status::timeout) << canopy::to_string(m) << ": " << r.message;
    EXPECT_LT(ran.load(), n / 2) << canopy::to_string(m) << ": the chain ran on past its deadline";
    ran = 0;
    const canopy::run_result t = s.run(tree_only_call<decltype(sleepy)>{&sleepy});
    EXPECT_EQ(t.code, canopy::status::timeout) << canopy::to_string(m) << ", tree_only ops: " << t.message;
    EXPECT_LT(ran.load(), n / 2) << canopy::to_string(m) << ", tree_only ops: the chain ran on past its deadline";
  }
}

}  // namespace
