// The GPU backend against closed-form oracles: every task runs exactly once, after its
// dependencies, for every mode and grid shape; failures are typed and the next run works.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <tuple>

#include "canopy/gpu_scheduler.cuh"
#include "canopy/prefetch.cuh"
#include "gpu_test.hpp"
#include "scheduler_test_graphs.hpp"

namespace {

using canopy::mode;
using canopy::task_id;

// The shared fixture skips without a device and checks for asynchronous errors in TearDown.
using GpuTest = canopy::test::gpu_test;

// value[t] = 1 + sum of value over predecessors; runs[t] counts executions.
struct sum_ops {
  const std::int32_t* pred_offsets;
  const task_id* preds;
  long long* value;
  int* runs;
  __device__ void operator()(task_id t) const {
    long long s = 1;
    for (std::int32_t j = pred_offsets[t]; j < pred_offsets[t + 1]; ++j) s += value[preds[j]];
    value[t] = s;
    atomicAdd(runs + t, 1);
  }
};

struct oracle_run {
  const canopy::task_graph& g;
  canopy::test::device_buffer<std::int32_t> pred_offsets{g.pred_offsets()};
  canopy::test::device_buffer<task_id> preds{g.predecessors()};
  canopy::test::device_buffer<long long> value{static_cast<std::size_t>(g.task_count())};
  canopy::test::device_buffer<int> runs{static_cast<std::size_t>(g.task_count())};
  explicit oracle_run(const canopy::task_graph& graph) : g(graph) {}
  canopy::run_result run(canopy::gpu_scheduler& s) {
    value.upload(std::vector<long long>(value.size(), -1));  // poison: an unwritten task shows as -1
    runs.fill_zero();
    return s.run(sum_ops{pred_offsets.data(), preds.data(), value.data(), runs.data()});
  }
  void expect_exact(const std::string& what) {
    const auto expect = canopy::testing::serial_values(g);
    const auto v = value.download();
    const auto r = runs.download();
    for (task_id t = 0; t < g.task_count(); ++t) {
      ASSERT_EQ(r[t], 1) << what << ": task " << t << " ran " << r[t] << " times";
      ASSERT_EQ(v[t], expect[t]) << what << ": task " << t;
    }
  }
};

class GpuSchedulerModes : public GpuTest, public ::testing::WithParamInterface<mode> {};

TEST_P(GpuSchedulerModes, TreesAndDagsOnEveryGridShape) {
  const mode m = GetParam();
  std::vector<canopy::task_graph> graphs;
  // n = 1001 is a deep, narrow tree (parents within 4 ids: ~400 levels); the others are random
  // recursive trees (depth ~ ln n), and a random DAG.
  for (std::int32_t n : {1, 2, 1001, 30000})
    graphs.push_back(canopy::task_graph::from_parents(canopy::testing::random_tree_parents(n, 5 + n, n == 1001 ? 4 : 0)));
  graphs.push_back(canopy::task_graph::from_edges(5000, canopy::testing::random_dag_edges(5000, 4, 77)));
  for (const auto& g : graphs) {
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.deadline = std::chrono::seconds(5);
    canopy::gpu_scheduler probe(g, opt);
    const int full = probe.max_blocks<sum_ops>(m);
    for (int blocks : {1, probe.sm_count(), full}) {
      opt.blocks = blocks;
      canopy::gpu_scheduler s(g, opt);
      oracle_run o(g);
      for (int rep = 0; rep < 2; ++rep) {  // the second run relies on the in-kernel counter reset
        const auto start = std::chrono::steady_clock::now();
        const auto r = o.run(s);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (ms > 100) std::printf("slow run: %s n=%d blocks=%d: %.1f ms\n", std::string(canopy::to_string(m)).c_str(), g.task_count(), blocks, ms);
        const std::string what = std::string(canopy::to_string(m)) + " n=" + std::to_string(g.task_count()) +
                                 " blocks=" + std::to_string(blocks) + " rep=" + std::to_string(rep);
        if (!r.ok()) {
          const auto runs = o.runs.download();
          long long ran = 0;
          for (int x : runs) ran += x;
          FAIL() << what << ": " << canopy::to_string(r.code) << ": " << r.message << "; tasks run: " << ran;
        }
        o.expect_exact(what);
      }
    }
  }
}

TEST_P(GpuSchedulerModes, TinyQueuesForceEverySpillPath) {
  const mode m = GetParam();
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(20000, 99));
  for (int cap : {1, 2, 3}) {
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.private_queue_capacity = cap;
    opt.shared_queue_capacity = cap;
    opt.blocks = 8;
    canopy::gpu_scheduler s(g, opt);
    oracle_run o(g);
    const auto r = o.run(s);
    ASSERT_TRUE(r.ok()) << canopy::to_string(m) << " cap " << cap << ": " << r.message;
    o.expect_exact(std::string(canopy::to_string(m)) + " cap " + std::to_string(cap));
  }
}

// The same oracle on lane groups (canopy/lane_group.cuh): the lanes split the predecessors, sum
// with shuffles, lane 0 publishes; every lane counts itself in. Other lanes read predecessors'
// values that other SMs wrote during the run, through L2 as the header asks.
template <int G>
struct group_sum_ops {
  static constexpr int group_size = G;
  const std::int32_t* pred_offsets;
  const task_id* preds;
  long long* value;
  int* lanes;  // lanes that ran the task
  __device__ void operator()(task_id) const {}  // never called on the GPU when the group operator exists
  template <int L>
  __device__ void operator()(task_id t, const canopy::lane_group<L>& g) const {
    long long s = 0;
    for (std::int32_t j = pred_offsets[t] + g.rank; j < pred_offsets[t + 1]; j += L) s += __ldcg(value + preds[j]);
    s = canopy::group_sum(g, s);
    if (g.rank == 0) value[t] = s + 1;
    atomicAdd(lanes + t, 1);
  }
};

template <int G>
void check_groups(mode m) {
  std::vector<canopy::task_graph> graphs;
  graphs.push_back(canopy::task_graph::from_parents(canopy::testing::random_tree_parents(20000, 3)));
  graphs.push_back(canopy::task_graph::from_edges(5000, canopy::testing::random_dag_edges(5000, 6, 78)));
  const int expect_lanes = canopy::traits_of(m).block_fetch ? G : 1;  // warp-master modes use one lane
  for (const auto& g : graphs) {
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.deadline = std::chrono::seconds(5);
    canopy::gpu_scheduler probe(g, opt);
    for (int blocks : {1, probe.max_blocks<group_sum_ops<G>>(m)}) {
      opt.blocks = blocks;
      canopy::gpu_scheduler s(g, opt);
      canopy::test::device_buffer<std::int32_t> pred_offsets{g.pred_offsets()};
      canopy::test::device_buffer<task_id> preds{g.predecessors()};
      canopy::test::device_buffer<long long> value{static_cast<std::size_t>(g.task_count())};
      canopy::test::device_buffer<int> lanes{static_cast<std::size_t>(g.task_count())};
      for (int rep = 0; rep < 2; ++rep) {
        value.upload(std::vector<long long>(value.size(), -1));
        lanes.fill_zero();
        const auto r = s.run(group_sum_ops<G>{pred_offsets.data(), preds.data(), value.data(), lanes.data()});
        const std::string what = std::string(canopy::to_string(m)) + " G=" + std::to_string(G) + " n=" +
                                 std::to_string(g.task_count()) + " blocks=" + std::to_string(blocks);
        ASSERT_TRUE(r.ok()) << what << ": " << r.message;
        const auto expect = canopy::testing::serial_values(g);
        const auto v = value.download();
        const auto l = lanes.download();
        for (task_id t = 0; t < g.task_count(); ++t) {
          ASSERT_EQ(l[t], expect_lanes) << what << ": task " << t;
          ASSERT_EQ(v[t], expect[t]) << what << ": task " << t;
        }
      }
    }
  }
}

TEST_P(GpuSchedulerModes, LaneGroupsRunEachTaskOnceOnEveryLane) {
  check_groups<4>(GetParam());
  check_groups<32>(GetParam());
}

// group_sum_ops with the optional prefetch hook (canopy/prefetch.cuh): it counts the hints per task
// and stage and notes which lane group (block, group) gave each, and the operator notes which
// group ran each task; an id outside the graph counts in `stray`.
struct prefetch_counting_ops : group_sum_ops<4> {
  int* structure;
  int* data;
  int* hinted_by;  // per task: block * 1024 + group of the last hint
  int* run_by;     // per task: block * 1024 + group that ran it
  int* stray;
  int task_count;
  __device__ static int here() { return static_cast<int>(blockIdx.x) * 1024 + static_cast<int>(threadIdx.x) / 4; }
  __device__ void prefetch(task_id t, canopy::prefetch_stage stage) const {
    if (t < 0 || t >= task_count) {
      atomicAdd(stray, 1);
      return;
    }
    atomicAdd((stage == canopy::prefetch_stage::structure ? structure : data) + t, 1);
    hinted_by[t] = here();
  }
  template <int L>
  __device__ void operator()(task_id t, const canopy::lane_group<L>& g) const {
    group_sum_ops<4>::operator()(t, g);
    if (g.rank == 0) run_by[t] = here();
  }
};

TEST_P(GpuSchedulerModes, PrefetchHintsNameOnlyTasksOfTheGroupsShare) {
  const mode m = GetParam();
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(20000, 5));
  canopy::scheduler_options opt;
  opt.mode = m;
  opt.deadline = std::chrono::seconds(5);
  canopy::gpu_scheduler probe(g, opt);
  for (int blocks : {1, probe.max_blocks<prefetch_counting_ops>(m)}) {
    opt.blocks = blocks;
    canopy::gpu_scheduler s(g, opt);
    const auto n = static_cast<std::size_t>(g.task_count());
    canopy::test::device_buffer<std::int32_t> pred_offsets{g.pred_offsets()};
    canopy::test::device_buffer<task_id> preds{g.predecessors()};
    canopy::test::device_buffer<long long> value{n};
    canopy::test::device_buffer<int> lanes{n}, structure{n}, data{n}, hinted_by{n}, run_by{n}, stray{1};
    value.upload(std::vector<long long>(n, -1));
    hinted_by.upload(std::vector<int>(n, -1));
    run_by.upload(std::vector<int>(n, -1));
    lanes.fill_zero();
    structure.fill_zero();
    data.fill_zero();
    stray.fill_zero();
    const prefetch_counting_ops ops{{pred_offsets.data(), preds.data(), value.data(), lanes.data()},
                                    structure.data(), data.data(), hinted_by.data(), run_by.data(), stray.data(),
                                    g.task_count()};
    const auto r = s.run(ops);
    const std::string what = std::string(canopy::to_string(m)) + " blocks=" + std::to_string(blocks);
    ASSERT_TRUE(r.ok()) << what << ": " << r.message;
    const auto expect = canopy::testing::serial_values(g);
    const auto v = value.download();
    const auto st = structure.download();
    const auto d = data.download();
    const auto hb = hinted_by.download();
    const auto rb = run_by.download();
    long long hinted = 0;
    for (task_id t = 0; t < g.task_count(); ++t) {
      ASSERT_EQ(v[t], expect[t]) << what << ": task " << t;
      // A task is in one batch; on a full batch its group hints its structure once when the share
      // starts and its data once (with the share's start or while running the task before it).
      ASSERT_LE(st[t], 1) << what << ": task " << t;
      ASSERT_EQ(d[t], st[t]) << what << ": task " << t;
      if (st[t] == 1) {
        ASSERT_EQ(hb[t], rb[t]) << what << ": task " << t << " was hinted by another group than the one that ran it";
        ++hinted;
      }
    }
    EXPECT_EQ(stray.download()[0], 0) << what;
    if (!canopy::traits_of(m).block_fetch) {
      EXPECT_EQ(hinted, 0) << what << ": the warp-master modes run one task per warp, no shares";
    } else if (blocks == 1 && CANOPY_PREFETCH_AHEAD > 0) {
      // One block: its first batch is a full batch of sources, so the hints must have been used.
      EXPECT_GT(hinted, 0) << what;
    }
  }
}

// Host arithmetic, no device needed: a run lowers the tasks per group when the sources would give
// a block fewer than about four batches, never below min(4, Ops's), never above Ops's.
struct sixteen_per_group_ops {
  static constexpr int group_size = 16;
  static constexpr int tasks_per_group = 16;
};
TEST(RunBatchMax, FewSourcesPerBlockMeanSmallerBatches) {
  using canopy::detail::run_batch_max;
  // 256 threads: 16 groups of 16 lanes; 528 blocks.
  EXPECT_EQ(run_batch_max<sixteen_per_group_ops>(256, 2097152, 528), 16 * 16);  // 62 per group fit
  EXPECT_EQ(run_batch_max<sixteen_per_group_ops>(256, 262144, 528), 16 * 7);    // 7.8
  EXPECT_EQ(run_batch_max<sixteen_per_group_ops>(256, 4096, 528), 16 * 4);      // floor: 4
  EXPECT_EQ(run_batch_max<sixteen_per_group_ops>(256, 0, 1), 16 * 4);
  // Ops that keep the default (4 per group, at most G) are never changed.
  EXPECT_EQ(run_batch_max<group_sum_ops<4>>(256, 1, 528), 64 * 4);
  EXPECT_EQ(run_batch_max<group_sum_ops<4>>(256, 100000000, 528), 64 * 4);
  EXPECT_EQ(run_batch_max<sum_ops>(128, 100000000, 1), 128 * 1);  // one lane per task: one each
}

INSTANTIATE_TEST_SUITE_P(AllModes, GpuSchedulerModes, ::testing::ValuesIn(canopy::all_modes), [](const auto& info) {
  std::string name(canopy::to_string(info.param));
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
});

TEST_F(GpuTest, EveryPushPolicyIsExact) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(30000, 3));
  for (auto p : canopy::all_push_policies) {
    canopy::scheduler_options opt;
    opt.mode = mode::lockfree;
    opt.policy = p;
    opt.private_queue_capacity = 2;
    canopy::gpu_scheduler s(g, opt);
    oracle_run o(g);
    ASSERT_TRUE(o.run(s).ok()) << canopy::to_string(p);
    o.expect_exact(std::string(canopy::to_string(p)));
  }
}

// Runs are launched through cached graphs (one per kernel, grid and counter set; runs alternate
// between two sets). A cached launch must follow every change of the caller's Ops (another output
// buffer: a stale launch would leave the new buffer poisoned), of the mode (another kernel) and of
// the scheduler's state (the push policy: counted, since it does not change results), on both
// counter sets, and must not be updated when nothing changed; with graph launches off nothing is
// cached and runs stay exact.
TEST_F(GpuTest, GraphLaunchesFollowEveryChangeOfOpsModeAndPolicy) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(3000, 6));
  canopy::gpu_scheduler s(g, canopy::scheduler_options{});
  oracle_run a(g), b(g);
  auto runs = [&](std::initializer_list<oracle_run*> seq, const std::string& what) {
    int step = 0;
    for (oracle_run* o : seq) {
      const auto r = o->run(s);
      ASSERT_TRUE(r.ok()) << what << ", run " << step << ": " << r.message;
      o->expect_exact(what + ", run " + std::to_string(step++));
    }
  };
  runs({&a, &a, &a, &a}, "same Ops");
  EXPECT_EQ(s.cached_launches(), 2u);  // one mode, one grid, two counter sets
  EXPECT_EQ(s.launch_updates(), 0u);   // nothing changed: no update
  // Sets 0, 1, 0, 1, 0, 1: a run updates its set's graph when that graph last ran the other Ops.
  runs({&b, &b, &a, &b, &a, &a}, "Ops alternating");
  EXPECT_EQ(s.cached_launches(), 2u);
  EXPECT_EQ(s.launch_updates(), 4u);
  s.set_push_policy(canopy::push_policy::least_loaded);
  runs({&a, &a, &a}, "policy changed, same Ops");
  EXPECT_EQ(s.launch_updates(), 6u);   // each counter set once, then unchanged
  s.set_mode(mode::lockfree);
  runs({&b, &a}, "mode changed");
  EXPECT_EQ(s.cached_launches(), 4u);  // new graphs are built, not updated
  EXPECT_EQ(s.launch_updates(), 6u);
  s.set_graph_launch(false);
  runs({&b, &a, &b}, "direct launch");
  EXPECT_EQ(s.cached_launches(), 4u);
  EXPECT_EQ(s.launch_updates(), 6u);
}

TEST_F(GpuTest, TooManyBlocksIsRefusedBeforeLaunch) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(100, 1));
  canopy::scheduler_options opt;
  canopy::gpu_scheduler probe(g, opt);
  opt.blocks = probe.max_blocks<sum_ops>(opt.mode) + 1;
  canopy::gpu_scheduler s(g, opt);
  oracle_run o(g);
  const auto r = o.run(s);
  EXPECT_EQ(r.code, canopy::status::invalid_argument);
  EXPECT_NE(r.message.find("co-resident"), std::string::npos) << r.message;
}

// The idle blocks' sleep cap: automatic (4 ns per block, 2-64 us), or given; out of range is a
// typed error at construction. Every value runs the same graph exactly.
static_assert(canopy::detail::auto_idle_sleep_ns(1) == 2048);
static_assert(canopy::detail::auto_idle_sleep_ns(1188) == 4752);
static_assert(canopy::detail::auto_idle_sleep_ns(1 << 20) == 65536);

TEST_F(GpuTest, IdleSleepCapIsCheckedAndEveryValueIsExact) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(3000, 4));
  for (long ns : {-1L, 1000001L}) {
    canopy::scheduler_options opt;
    opt.idle_sleep_max = std::chrono::nanoseconds(ns);
    try {
      canopy::gpu_scheduler s(g, opt);
      ADD_FAILURE() << "idle_sleep_max " << ns << " ns was accepted";
    } catch (const canopy::error& e) {
      EXPECT_EQ(e.code(), canopy::status::invalid_argument) << e.what();
    }
  }
  for (long ns : {0L, 64L, 2048L, 100000L, 1000000L}) {
    canopy::scheduler_options opt;
    opt.idle_sleep_max = std::chrono::nanoseconds(ns);
    canopy::gpu_scheduler s(g, opt);
    oracle_run o(g);
    const auto r = o.run(s);
    ASSERT_TRUE(r.ok()) << ns << " ns: " << r.message;
    o.expect_exact("idle sleep cap " + std::to_string(ns) + " ns");
  }
}

TEST_F(GpuTest, QueueOverflowIsReportedAndTheNextLaunchWorks) {
  std::vector<task_id> parent(1 + 2000 + 8000, canopy::no_task);
  for (int i = 1; i <= 2000; ++i) parent[i] = 0;
  for (int i = 0; i < 8000; ++i) parent[2001 + i] = 1 + i / 4;
  const auto g = canopy::task_graph::from_parents(parent);
  for (mode m : {mode::fixed_queue, mode::lockfree}) {
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.blocks = 2;
    opt.private_queue_capacity = 1;
    opt.shared_queue_capacity = 1;
    opt.global_queue_capacity = 1;
    canopy::gpu_scheduler s(g, opt);
    oracle_run o(g);
    const auto r = o.run(s);
    EXPECT_EQ(r.code, canopy::status::queue_overflow) << canopy::to_string(m) << ": " << r.message;
    EXPECT_NE(r.task, canopy::no_task);
    // Same process, same scheduler, a mode that needs no queue for a tree: must succeed.
    s.set_mode(mode::continuation);
    const auto again = o.run(s);
    ASSERT_TRUE(again.ok()) << again.message;
    o.expect_exact("after overflow");
  }
}

TEST_F(GpuTest, WithheldDependencyTimesOutWithinTwiceTheDeadline) {
  auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(5000, 8));
  const task_id victim = 42;
  g.withhold_dependency(victim);
  for (mode m : {mode::mutex, mode::all_threads, mode::continuation}) {
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.deadline = std::chrono::milliseconds(1000);
    canopy::gpu_scheduler s(g, opt);
    oracle_run o(g);
    const auto start = std::chrono::steady_clock::now();
    const auto r = o.run(s);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(r.code, canopy::status::timeout) << canopy::to_string(m) << ": " << r.message;
    EXPECT_EQ(r.task, victim) << r.message;
    EXPECT_LT(took, 2 * opt.deadline) << canopy::to_string(m);
  }
}

}  // namespace
