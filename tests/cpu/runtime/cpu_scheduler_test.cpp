// The CPU backend runs every mode; each run must execute every task exactly once, after all of its
// dependencies, or end with a typed status (never a silent drop, never a hang).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <tuple>

#include "canopy/cpu_scheduler.hpp"
#include "scheduler_test_graphs.hpp"

namespace {

using canopy::mode;
using canopy::task_id;

// Reads its predecessors' values with plain loads: if the scheduler failed to order a task after
// its dependencies (a missing release/acquire), ThreadSanitizer reports it here, and the value
// check catches it in a plain build.
struct sum_ops {
  const canopy::task_graph* graph;
  std::int64_t* value;
  std::atomic<int>* runs;
  void operator()(task_id t) const {
    std::int64_t s = 1;
    for (std::int32_t j = graph->pred_offsets()[t]; j < graph->pred_offsets()[t + 1]; ++j)
      s += value[graph->predecessors()[j]];
    value[t] = s;
    runs[t].fetch_add(1, std::memory_order_relaxed);
  }
};

void expect_exact_run(const canopy::task_graph& g, const canopy::scheduler_options& opt, int repeats = 2) {
  canopy::cpu_scheduler sched(g, opt);
  const auto expect = canopy::testing::serial_values(g);
  for (int rep = 0; rep < repeats; ++rep) {  // the second run checks the counters were reset
    std::vector<std::int64_t> value(static_cast<std::size_t>(g.task_count()), -1);
    std::vector<std::atomic<int>> runs(static_cast<std::size_t>(g.task_count()));
    const auto r = sched.run(sum_ops{&g, value.data(), runs.data()});
    ASSERT_TRUE(r.ok()) << canopy::to_string(r.code) << ": " << r.message << " (mode " << canopy::to_string(opt.mode)
                        << ", workers " << sched.worker_count() << ")";
    for (task_id t = 0; t < g.task_count(); ++t) {
      ASSERT_EQ(runs[t].load(), 1) << "task " << t << " mode " << canopy::to_string(opt.mode);
      ASSERT_EQ(value[t], expect[t]) << "task " << t << " mode " << canopy::to_string(opt.mode);
    }
  }
}

class CpuSchedulerModes : public ::testing::TestWithParam<std::tuple<mode, int>> {};

TEST_P(CpuSchedulerModes, TreesOfManySizes) {
  const auto [m, workers] = GetParam();
  for (std::int32_t n : {0, 1, 2, 7, 1001, 20000}) {
    for (std::uint64_t seed : {1u, 2u}) {
      const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(n, seed, seed == 2 ? 3 : 0));
      canopy::scheduler_options opt;
      opt.mode = m;
      opt.blocks = workers;
      expect_exact_run(g, opt);
    }
  }
}

TEST_P(CpuSchedulerModes, RandomDags) {
  const auto [m, workers] = GetParam();
  for (std::uint64_t seed : {3u, 4u, 5u}) {
    const auto edges = canopy::testing::random_dag_edges(3000, 4, seed);
    const auto g = canopy::task_graph::from_edges(3000, edges);
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.blocks = workers;
    expect_exact_run(g, opt);
  }
}

TEST_P(CpuSchedulerModes, TinyQueuesForceEverySpillPath) {
  const auto [m, workers] = GetParam();
  for (int cap : {1, 2, 3}) {
    const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(5000, 40 + cap));
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.blocks = workers;
    opt.private_queue_capacity = cap;
    opt.shared_queue_capacity = cap;  // the global queue keeps its default: a run can always finish
    expect_exact_run(g, opt, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(AllModes, CpuSchedulerModes,
                         ::testing::Combine(::testing::ValuesIn(canopy::all_modes), ::testing::Values(1, 2, 4, 8)),
                         [](const auto& info) {
                           std::string name(canopy::to_string(std::get<0>(info.param)));
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name + "_w" + std::to_string(std::get<1>(info.param));
                         });

TEST(CpuScheduler, EveryPushPolicyIsExact) {
  for (auto p : canopy::all_push_policies) {
    const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(20000, 9));
    canopy::scheduler_options opt;
    opt.mode = mode::lockfree;
    opt.policy = p;
    opt.blocks = 4;
    opt.private_queue_capacity = 2;
    expect_exact_run(g, opt);
  }
}

TEST(CpuScheduler, GlobalQueueOverflowIsReportedAndTheNextRunWorks) {
  // A star: 4000 leaves under one root... whose leaves all become... use a two-level tree with
  // many internal nodes ready at once, and no room for them anywhere.
  std::vector<task_id> parent(1 + 500 + 500 * 4, canopy::no_task);
  for (int i = 1; i <= 500; ++i) parent[i] = 0;
  for (int i = 0; i < 2000; ++i) parent[501 + i] = 1 + i / 4;
  const auto g = canopy::task_graph::from_parents(parent);
  canopy::scheduler_options opt;
  opt.mode = mode::lockfree;
  opt.blocks = 2;
  opt.private_queue_capacity = 1;
  opt.shared_queue_capacity = 1;
  opt.global_queue_capacity = 1;
  canopy::cpu_scheduler sched(g, opt);
  std::vector<std::int64_t> value(parent.size());
  std::vector<std::atomic<int>> runs(parent.size());
  const auto r = sched.run(sum_ops{&g, value.data(), runs.data()});
  EXPECT_EQ(r.code, canopy::status::queue_overflow) << r.message;
  EXPECT_NE(r.task, canopy::no_task);
  EXPECT_NE(r.message.find("queue full"), std::string::npos);

  opt.global_queue_capacity = 0;  // a fresh scheduler with room must work, and so must ...
  expect_exact_run(g, opt, 1);
  // ... the same scheduler again: a failed run must leave nothing behind but the failure.
  opt.mode = mode::continuation;  // continuation never queues a tree's parents: no overflow
  canopy::cpu_scheduler again(g, opt);
  std::vector<std::int64_t> v2(parent.size());
  std::vector<std::atomic<int>> r2(parent.size());
  EXPECT_TRUE(again.run(sum_ops{&g, v2.data(), r2.data()}).ok());
}

TEST(CpuScheduler, SameSchedulerRunsAgainAfterOverflow) {
  std::vector<task_id> parent(1 + 300 + 300 * 4, canopy::no_task);
  for (int i = 1; i <= 300; ++i) parent[i] = 0;
  for (int i = 0; i < 1200; ++i) parent[301 + i] = 1 + i / 4;
  const auto g = canopy::task_graph::from_parents(parent);
  canopy::scheduler_options opt;
  opt.mode = mode::fixed_queue;
  opt.blocks = 2;
  opt.global_queue_capacity = 1;
  canopy::cpu_scheduler sched(g, opt);
  std::vector<std::int64_t> value(parent.size());
  std::vector<std::atomic<int>> runs(parent.size());
  EXPECT_EQ(sched.run(sum_ops{&g, value.data(), runs.data()}).code, canopy::status::queue_overflow);
  // The counters must have been restored: a second failing run fails the same way, not worse.
  std::vector<std::atomic<int>> runs2(parent.size());
  EXPECT_EQ(sched.run(sum_ops{&g, value.data(), runs2.data()}).code, canopy::status::queue_overflow);
}

TEST(CpuScheduler, WithheldDependencyTimesOutNamingTheTask) {
  auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(2000, 11));
  const task_id victim = 17;
  g.withhold_dependency(victim);
  for (mode m : {mode::mutex, mode::lockfree, mode::continuation}) {
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.blocks = 3;
    opt.deadline = std::chrono::milliseconds(200);
    canopy::cpu_scheduler sched(g, opt);
    std::vector<std::int64_t> value(2000);
    std::vector<std::atomic<int>> runs(2000);
    const auto start = std::chrono::steady_clock::now();
    const auto r = sched.run(sum_ops{&g, value.data(), runs.data()});
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(r.code, canopy::status::timeout) << canopy::to_string(m);
    EXPECT_EQ(r.task, victim) << r.message;
    EXPECT_LT(took, 2 * opt.deadline) << "a timeout must return within twice the deadline";
    EXPECT_EQ(runs[victim].load(), 0);
  }
}

TEST(CpuScheduler, HostAbortStopsARun) {
  auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(100, 12));
  g.withhold_dependency(0);  // never finishes on its own
  canopy::scheduler_options opt;
  opt.blocks = 2;
  opt.deadline = std::chrono::seconds(60);
  canopy::cpu_scheduler sched(g, opt);
  std::vector<std::int64_t> value(100);
  std::vector<std::atomic<int>> runs(100);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    sched.request_abort();
  });
  const auto start = std::chrono::steady_clock::now();
  const auto r = sched.run(sum_ops{&g, value.data(), runs.data()});
  stopper.join();
  EXPECT_EQ(r.code, canopy::status::aborted);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(CpuScheduler, RejectsBadOptions) {
  const auto g = canopy::task_graph::from_parents(std::vector<task_id>{canopy::no_task});
  canopy::scheduler_options opt;
  opt.blocks = -1;
  EXPECT_THROW(canopy::cpu_scheduler(g, opt), canopy::error);
  opt = {};
  opt.deadline = std::chrono::milliseconds(0);
  EXPECT_THROW(canopy::cpu_scheduler(g, opt), canopy::error);
}

}  // namespace
