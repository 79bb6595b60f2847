// SPDX-License-Identifier: Apache-2.0
// The GPU backend: the scheduler contract (tests/common/scheduler_contract.inc) in the persistent
// kernel, plus what only the GPU backend has: lane groups, prefetch hooks, the batch size, cached
// graph launches, the idle-sleep cap and the GPU-only options.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "canopy/gpu_scheduler.cuh"
#include "canopy/prefetch.cuh"
#include "gpu_backend.cuh"

using backend = canopy::test::gpu_backend;
#include "scheduler_contract.inc"

CANOPY_INSTANTIATE_SCHEDULER_CONTRACT(gpu);

namespace {

using canopy::mode;
using canopy::task_id;
using canopy::test::oracle_ops;
using workspace = canopy::test::gpu_backend::workspace;

// The shared fixture skips without a device and checks for asynchronous errors in TearDown.
using GpuTest = canopy::test::gpu_test;

class GpuSchedulerModes : public GpuTest, public ::testing::WithParamInterface<mode> {};

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

// The same op declaring tree_only: on a tree it runs through the code compiled for such Ops
// (warp-rounds' own loop, whose warps run G-lane groups 32 / G at a time).
template <int G>
struct tree_group_sum_ops : group_sum_ops<G> {
  static constexpr bool tree_only = true;
};

// group_sum_ops' buffers over one graph: fresh_op() clears them for a run; each_task_once says
// whether every task's value is the serial reference's and `expect_lanes` lanes ran it.
struct group_sum_buffers {
  explicit group_sum_buffers(const canopy::task_graph& g)
      : pred_offsets{g.pred_offsets()},
        preds{g.predecessors()},
        value{static_cast<std::size_t>(g.task_count())},
        lanes{static_cast<std::size_t>(g.task_count())},
        expect{canopy::testing::serial_values<long long>(g)} {}
  template <int G>
  group_sum_ops<G> fresh_op() {
    value.upload(std::vector<long long>(value.size(), -1));
    lanes.fill_bytes(0);
    return {pred_offsets.data(), preds.data(), value.data(), lanes.data()};
  }
  ::testing::AssertionResult each_task_once(int expect_lanes) const {
    const auto v = value.download();
    const auto l = lanes.download();
    for (std::size_t t = 0; t < expect.size(); ++t) {
      if (l[t] != expect_lanes)
        return ::testing::AssertionFailure() << "task " << t << " ran on " << l[t] << " lanes, not " << expect_lanes;
      if (v[t] != expect[t]) return ::testing::AssertionFailure() << "task " << t << ": value " << v[t] << ", not " << expect[t];
    }
    return ::testing::AssertionSuccess();
  }
  canopy::device_buffer<std::int32_t> pred_offsets;
  canopy::device_buffer<task_id> preds;
  canopy::device_buffer<long long> value;
  canopy::device_buffer<int> lanes;
  std::vector<long long> expect;
};

// Hubs with fans: hub k has 1 + (37 k mod 70) successors, all of which are the predecessors of hub
// k + 1, so that a climbing group's lanes each arrive at none, one or several successors (the
// arrivals issued together, arrive_each), and the one that brings the next hub in must hand it to
// the group while the fan's other tasks are staged.
canopy::task_graph fan_dag(int hubs) {
  std::vector<std::pair<task_id, task_id>> edges;
  task_id next = 1;
  task_id hub = 0;
  for (int k = 0; k + 1 < hubs; ++k) {
    const int fan = 1 + (37 * k) % 70;
    const task_id following = next + fan;
    for (int f = 0; f < fan; ++f) {
      edges.emplace_back(hub, next + f);
      edges.emplace_back(next + f, following);
    }
    hub = following;
    next = following + 1;
  }
  return canopy::task_graph::from_edges(next, edges);
}

// Layers of `width` tasks, each depending on every task of the layer before: every task has
// `width` successors, more than a lane issues in one round of arrive_each when the group is
// narrower (and each of them has `width` predecessors, so most arrivals are not the last).
canopy::task_graph mesh_dag(int layers, int width) {
  std::vector<std::pair<task_id, task_id>> edges;
  for (int l = 0; l + 1 < layers; ++l)
    for (int a = 0; a < width; ++a)
      for (int b = 0; b < width; ++b) edges.emplace_back(l * width + a, (l + 1) * width + b);
  return canopy::task_graph::from_edges(layers * width, edges);
}

// Two hubs of `fan` successors each, the second hub waiting for the whole first fan: wider than
// the 32 G successors a group resolves in one window (resolve_dag_successors in block_loop.cuh),
// so a climbing group resolves several windows and pushes a burst from each, spread over shared
// queues and the global queue; every fan task has one predecessor, so each arrival makes one ready.
canopy::task_graph wide_fan_dag(int fan) {
  std::vector<std::pair<task_id, task_id>> edges;
  const task_id hub2 = 1 + fan;
  for (int f = 0; f < fan; ++f) {
    edges.emplace_back(0, 1 + f);
    edges.emplace_back(1 + f, hub2);
    edges.emplace_back(hub2, hub2 + 1 + f);
  }
  return canopy::task_graph::from_edges(hub2 + 1 + fan, edges);
}

template <int G>
void check_groups(mode m) {
  std::vector<canopy::task_graph> graphs;
  graphs.push_back(canopy::task_graph::from_parents(canopy::testing::random_tree_parents(20000, 3)));
  graphs.push_back(canopy::task_graph::from_edges(5000, canopy::testing::random_dag_edges(5000, 6, 78)));
  graphs.push_back(fan_dag(40));
  graphs.push_back(mesh_dag(30, 13));
  graphs.push_back(wide_fan_dag(2100));
  const int expect_lanes = canopy::traits_of(m).block_fetch ? G : 1;  // warp-master modes use one lane
  for (const auto& g : graphs) {
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.deadline = std::chrono::seconds(5);
    canopy::gpu_scheduler probe(g, opt);
    for (int blocks : {1, std::min(probe.max_blocks<group_sum_ops<G>>(m), probe.max_blocks<tree_group_sum_ops<G>>(m))}) {
      opt.blocks = blocks;
      canopy::gpu_scheduler s(g, opt);
      group_sum_buffers b(g);
      for (int rep = 0; rep < 2; ++rep) {
        const group_sum_ops<G> op = b.fresh_op<G>();
        const bool tree_only = g.is_tree() && rep == 1;  // the tree's second run: the op declaring tree_only
        const auto r = tree_only ? s.run(tree_group_sum_ops<G>{op}) : s.run(op);
        const std::string what = std::string(canopy::to_string(m)) + " G=" + std::to_string(G) + " n=" +
                                 std::to_string(g.task_count()) + " blocks=" + std::to_string(blocks) +
                                 (tree_only ? " tree_only" : "");
        ASSERT_TRUE(r.ok()) << what << ": " << r.message;
        ASSERT_TRUE(b.each_task_once(expect_lanes)) << what;
      }
    }
  }
}

TEST_P(GpuSchedulerModes, LaneGroupsRunEachTaskOnceOnEveryLane) {
  check_groups<1>(GetParam());
  check_groups<4>(GetParam());
  check_groups<32>(GetParam());
}

// scheduler_options::dealt_sources: the first k sources dealt out at the start, the others claimed
// (one at a time in warp_rounds on a DAG). Every k from none to more than all, on a tree (also with
// Ops declaring tree_only, which warp_rounds runs by warps, run_tree_by_warps) and on DAGs, on one
// block and a full grid: each task runs once, after its predecessors. On a full grid k = sources / 3
// and sources - 1 end the dealt range inside a block's chunk (for chunks that do not divide them).
TEST_P(GpuSchedulerModes, EveryDealtSourceCountRunsEachTaskOnce) {
  const mode m = GetParam();
  constexpr int G = 4;
  std::vector<canopy::task_graph> graphs;  // small: mutex mode takes tens of µs a task (36 s at 5x the size)
  graphs.push_back(canopy::task_graph::from_parents(canopy::testing::random_tree_parents(4000, 3)));
  graphs.push_back(canopy::task_graph::from_edges(2000, canopy::testing::random_dag_edges(2000, 6, 78)));
  graphs.push_back(wide_fan_dag(700));
  const int expect_lanes = canopy::traits_of(m).block_fetch ? G : 1;
  for (const auto& g : graphs) {
    const auto sources = static_cast<std::int32_t>(g.sources().size());
    group_sum_buffers b(g);
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.deadline = std::chrono::seconds(5);
    canopy::gpu_scheduler probe(g, opt);
    const int full = std::min(probe.max_blocks<group_sum_ops<G>>(m), probe.max_blocks<tree_group_sum_ops<G>>(m));
    for (const std::int32_t dealt : {0, 1, sources / 3, sources - 1, std::numeric_limits<std::int32_t>::max()}) {
      for (int blocks : {1, full}) {
        opt.blocks = blocks;
        opt.dealt_sources = dealt;
        canopy::gpu_scheduler s(g, opt);
        for (int rep = 0; rep < (g.is_tree() ? 2 : 1); ++rep) {
          const group_sum_ops<G> op = b.fresh_op<G>();
          const bool tree_only = rep == 1;
          const auto r = tree_only ? s.run(tree_group_sum_ops<G>{op}) : s.run(op);
          const std::string what = std::string(canopy::to_string(m)) + " n=" + std::to_string(g.task_count()) +
                                   " sources=" + std::to_string(sources) + " dealt=" + std::to_string(dealt) +
                                   " blocks=" + std::to_string(blocks) + (tree_only ? " tree_only" : "");
          ASSERT_TRUE(r.ok()) << what << ": " << r.message;
          ASSERT_TRUE(b.each_task_once(expect_lanes)) << what;
        }
      }
    }
  }
}

// group_sum_ops naming every third task urgent (the priority hook, canopy/detail/ops_traits.cuh).
template <int G>
struct urgent_group_sum_ops : group_sum_ops<G> {
  __device__ bool urgent(task_id t) const { return t % 3 == 0; }
};

// Ops::urgent changes the order, never what runs: every mode (warp_rounds honours the hook, the
// others ignore it), on a tree, DAGs and a fan wider than a group's window (urgent successors of
// one task pushed to the global queue from several lanes and windows), one block and a full grid,
// and, in warp_rounds, with a global queue too small for the urgent tasks (what it refuses goes to
// the shared queues).
template <int G>
void check_urgent(mode m) {
  std::vector<canopy::task_graph> graphs;
  graphs.push_back(canopy::task_graph::from_parents(canopy::testing::random_tree_parents(4000, 3)));
  graphs.push_back(canopy::task_graph::from_edges(2000, canopy::testing::random_dag_edges(2000, 6, 78)));
  graphs.push_back(wide_fan_dag(2100));
  const int expect_lanes = canopy::traits_of(m).block_fetch ? G : 1;
  for (const auto& g : graphs) {
    group_sum_buffers b(g);
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.deadline = std::chrono::seconds(5);
    canopy::gpu_scheduler probe(g, opt);
    const int full = probe.max_blocks<urgent_group_sum_ops<G>>(m);
    for (const std::int32_t global_capacity : {0, 64}) {
      if (global_capacity != 0 && m != mode::warp_rounds) continue;  // the other modes need a global queue that holds any run
      for (int blocks : {1, full}) {
        opt.blocks = blocks;
        opt.global_queue_capacity = global_capacity;
        opt.shared_queue_capacity = global_capacity == 0 ? 0 : 4096;  // room for what the global queue refuses
        canopy::gpu_scheduler s(g, opt);
        const auto r = s.run(urgent_group_sum_ops<G>{b.fresh_op<G>()});
        const std::string what = std::string(canopy::to_string(m)) + " G=" + std::to_string(G) + " n=" +
                                 std::to_string(g.task_count()) + " blocks=" + std::to_string(blocks) +
                                 " global=" + std::to_string(global_capacity);
        ASSERT_TRUE(r.ok()) << what << ": " << r.message;
        ASSERT_TRUE(b.each_task_once(expect_lanes)) << what;
      }
    }
  }
}

// Groups of one lane, of four (eight groups a warp, each reserving for its own lanes) and of a warp.
TEST_P(GpuSchedulerModes, UrgentTasksRunEachTaskOnce) {
  check_urgent<1>(GetParam());
  check_urgent<4>(GetParam());
  check_urgent<32>(GetParam());
}

// Notes the order tasks start in (lane 0 takes a ticket); with UrgentLastTwo, tasks `last` - 1 and
// `last` are urgent.
template <bool UrgentLastTwo>
struct order_ops {
  static constexpr int group_size = 32;
  int* ticket;
  int* order;
  task_id last;
  __device__ void operator()(task_id) const {}
  template <int L>
  __device__ void operator()(task_id t, const canopy::lane_group<L>& g) const {
    if (g.rank == 0) order[t] = atomicAdd(ticket, 1);
  }
  __device__ bool urgent(task_id t) const
    requires UrgentLastTwo
  {
    return t >= last - 1;
  }
};

// One group (a block of one warp) runs a task whose 40 successors all become ready at once, the
// last two urgent: it runs the first urgent one next, then the other, which it finds in the global
// queue before the 38 it queued earlier in its block's queue. Without the hook it runs the first
// successor next.
TEST_F(GpuTest, UrgentTasksRunBeforeTheQueuedOnes) {
  constexpr int fan = 40;
  std::vector<std::pair<task_id, task_id>> edges;
  for (int f = 1; f <= fan; ++f) edges.emplace_back(0, f);
  const canopy::task_graph g = canopy::task_graph::from_edges(fan + 1, edges);
  canopy::scheduler_options opt;
  opt.mode = mode::warp_rounds;
  opt.blocks = 1;
  opt.threads_per_block = 32;
  opt.deadline = std::chrono::seconds(5);
  canopy::gpu_scheduler s(g, opt);
  canopy::device_buffer<int> ticket{1};
  canopy::device_buffer<int> order{static_cast<std::size_t>(fan + 1)};
  for (const bool with_hook : {true, false}) {
    ticket.fill_bytes(0);
    order.fill_bytes(0xff);
    const auto r = with_hook ? s.run(order_ops<true>{ticket.data(), order.data(), fan}) : s.run(order_ops<false>{ticket.data(), order.data(), fan});
    ASSERT_TRUE(r.ok()) << r.message;
    const auto o = order.download();
    std::vector<int> sorted = o;
    std::sort(sorted.begin(), sorted.end());
    for (int t = 0; t <= fan; ++t) ASSERT_EQ(sorted[t], t) << "each task once";
    ASSERT_EQ(o[0], 0);
    if (with_hook) {
      EXPECT_EQ(o[fan - 1], 1) << "the first urgent successor runs next";
      EXPECT_EQ(o[fan], 2) << "the other urgent successor runs before the queued ones";
    } else {
      // The first successor runs next; the lanes' pushes of the others reach the queue in no set order.
      EXPECT_EQ(o[1], 1);
    }
  }
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
    canopy::device_buffer<std::int32_t> pred_offsets{g.pred_offsets()};
    canopy::device_buffer<task_id> preds{g.predecessors()};
    canopy::device_buffer<long long> value{n};
    canopy::device_buffer<int> lanes{n}, structure{n}, data{n}, hinted_by{n}, run_by{n}, stray{1};
    value.upload(std::vector<long long>(n, -1));
    hinted_by.upload(std::vector<int>(n, -1));
    run_by.upload(std::vector<int>(n, -1));
    lanes.fill_bytes(0);
    structure.fill_bytes(0);
    data.fill_bytes(0);
    stray.fill_bytes(0);
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
    if (!canopy::traits_of(m).block_fetch || canopy::traits_of(m).warp_rounds) {
      // warp-rounds runs a DAG on lane groups that each take one task at a time (run_dag_by_groups).
      EXPECT_EQ(hinted, 0) << what << ": the warp-master modes and warp-rounds on a DAG run one task per group, no shares";
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
// Small cases for tools/gpu-check's compute-sanitizer steps (memcheck, racecheck, synccheck over
// every mode): a tree, a chain and a DAG of a few hundred tasks on 1, 3 and 8 blocks of 128 threads
// and the mode's own block size, each exact. Small enough that the sanitizers' 10-100x slowdown
// stays inside a minute over all modes, and the long deadline keeps a slowed run from timing out.
TEST_P(GpuSchedulerModes, SmallCasesForTheSanitizers) {
  const mode m = GetParam();
  std::vector<std::pair<std::string, canopy::task_graph>> graphs;
  graphs.emplace_back("tree 300", canopy::task_graph::from_parents(canopy::testing::random_tree_parents(300, 9)));
  graphs.emplace_back("chain 40", canopy::task_graph::from_parents(canopy::test::chain_parents(40)));
  graphs.emplace_back("dag 300", canopy::task_graph::from_edges(300, canopy::testing::random_dag_edges(300, 4, 10)));
  for (const auto& [name, g] : graphs) {
    for (int blocks : {1, 3, 8}) {
      canopy::scheduler_options opt;
      opt.mode = m;
      opt.blocks = blocks;
      opt.threads_per_block = 128;
      opt.deadline = std::chrono::seconds(120);
      // Two runs: on a tree the second is the op declaring tree_only (warp-rounds' own loop).
      scheduler_contract::expect_exact_runs(g, opt, name + ", " + std::to_string(blocks) + " blocks", 2);
      if (HasFatalFailure()) return;
    }
  }
}

// A tree_only op that takes ~20 µs a task, counting its runs.
struct slow_tree_op {
  static constexpr bool tree_only = true;
  unsigned* ran;
  __device__ void operator()(task_id) const {
    atomicAdd(ran, 1u);
    const std::uint64_t t0 = canopy::detail::global_timer_ns();
    while (canopy::detail::global_timer_ns() - t0 < 20000) {
    }
  }
};

// A chain that a warp (warp-rounds) or a group (continuation) climbs alone for longer than the
// deadline: the idle block fails the run, and the climber sees the stop (warp-rounds: every 64
// rounds; continuation: when the chain is cut and its block fetches again) long before the chain's
// end. Counted, not timed: fewer than half the tasks ran.
TEST_F(GpuTest, ALongTreeOnlyChainStillTimesOut) {
  constexpr int n = 3000;  // ~60 ms of tasks
  const auto g = canopy::task_graph::from_parents(canopy::test::chain_parents(n));
  for (const mode m : {mode::continuation, mode::warp_rounds}) {
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.blocks = 2;
    opt.threads_per_block = 64;
    opt.deadline = std::chrono::milliseconds(10);
    canopy::gpu_scheduler s(g, opt);
    canopy::device_buffer<unsigned> ran{1};
    for (int rep = 0; rep < 2; ++rep) {  // the second run: a timed-out run leaves the scheduler usable
      ran.fill_bytes(0);
      const auto r = s.run(slow_tree_op{ran.data()});
      const std::string what = std::string(canopy::to_string(m)) + " run " + std::to_string(rep);
      EXPECT_EQ(r.code, canopy::status::timeout) << what << ": " << r.message;
      const unsigned count = ran.download()[0];
      EXPECT_GT(count, 0u) << what;
      EXPECT_LT(count, static_cast<unsigned>(n / 2)) << what << ": the chain ran on past its deadline";
    }
  }
}

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
  EXPECT_EQ(run_batch_max<canopy::test::oracle_ops>(128, 100000000, 1), 128 * 1);  // one lane per task: one each
}

INSTANTIATE_TEST_SUITE_P(AllModes, GpuSchedulerModes, ::testing::ValuesIn(canopy::all_modes), [](const auto& info) {
  std::string name(canopy::to_string(info.param));
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
});

// Runs are launched through cached graphs (one per kernel and grid). A cached launch must follow
// every change of the caller's Ops (another output buffer: a stale launch would leave the new
// buffer poisoned), of the mode (another kernel) and of the scheduler's state (the push policy:
// counted, since it does not change results), and must not be updated when nothing changed; with
// graph launches off nothing is cached and runs stay exact.
TEST_F(GpuTest, GraphLaunchesFollowEveryChangeOfOpsModeAndPolicy) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(3000, 6));
  const auto expect = canopy::test::serial_sums(g);
  canopy::gpu_scheduler s(g, canopy::scheduler_options{});
  workspace a(g), b(g);  // two sets of buffers: two different Ops values
  auto runs = [&](std::initializer_list<workspace*> seq, const std::string& what) {
    int step = 0;
    for (workspace* w : seq) {
      const auto r = s.run(w->ops());
      ASSERT_TRUE(r.ok()) << what << ", run " << step << ": " << r.message;
      ASSERT_EQ(canopy::test::exact_run_errors(w->read(), expect), "") << what << ", run " << step;
      ++step;
    }
  };
  runs({&a, &a, &a, &a}, "same Ops");
  EXPECT_EQ(s.cached_launches(), 1u);  // one mode, one grid
  EXPECT_EQ(s.launch_updates(), 0u);   // nothing changed: no update
  runs({&b, &b, &a, &b, &a, &a}, "Ops alternating");  // an update at every change of Ops
  EXPECT_EQ(s.cached_launches(), 1u);
  EXPECT_EQ(s.launch_updates(), 4u);
  s.set_push_policy(canopy::push_policy::least_loaded);
  runs({&a, &a, &a}, "policy changed, same Ops");
  EXPECT_EQ(s.launch_updates(), 5u);   // once, then unchanged
  s.set_mode(mode::lockfree);
  runs({&b, &b}, "mode changed");
  EXPECT_EQ(s.cached_launches(), 2u);  // a new graph is built, not updated
  EXPECT_EQ(s.launch_updates(), 5u);
  s.set_graph_launch(false);
  runs({&b, &a, &b}, "direct launch");
  EXPECT_EQ(s.cached_launches(), 2u);
  EXPECT_EQ(s.launch_updates(), 5u);
}

// One block over the co-resident maximum is refused before launch: tests/gpu/stress/
// scheduler_limits_gpu_test.cu checks it for every mode and block size 64..1024.

// The idle blocks' sleep cap: automatic (4 ns per block, 2-64 us), or given; out of range is a
// typed error at construction. Every value runs the same graph exactly.
static_assert(canopy::detail::auto_idle_sleep_ns(1) == 2048);
static_assert(canopy::detail::auto_idle_sleep_ns(1188) == 4752);
static_assert(canopy::detail::auto_idle_sleep_ns(1 << 20) == 65536);
static_assert(canopy::detail::auto_idle_sleep_long_ns == 65536);

// The cap an idle block's master uses (detail::idle_sleep_cap), evaluated on the device for a
// table of (run time, idle time, automatic or given cap): 1/64 of the run, at least 512 ns; at
// most the grid's cap, unless the block has been idle for more than 16 of those, then 1/16 of its
// idle time up to the long cap (64 us automatic; the given cap when set by hand).
__global__ void idle_cap(canopy::detail::scheduler_ref r, unsigned long long run_ns, unsigned long long idle_ns,
                         unsigned* out) {
  *out = canopy::detail::idle_sleep_cap(r, 1000, 1000 + run_ns, 1000 + run_ns - idle_ns);
}

TEST_F(GpuTest, IdleSleepCapGrowsWithTheBlocksIdleTime) {
  struct row {
    unsigned long long run_ns, idle_ns;
    std::uint32_t max_ns, long_ns;
    unsigned expected;
  };
  const std::vector<row> rows = {
      {0, 0, 5280, 65536, 512},                   // a run that just started: the floor
      {10'000, 10'000, 5280, 65536, 512},         // 10 us in: still 1/64 of the run under the floor
      {200'000, 1'000, 5280, 65536, 3125},        // 1/64 of 200 us
      {1'000'000, 50'000, 5280, 65536, 5280},     // the grid's cap: idle 50 us, 1/16 of it under the cap
      {1'000'000, 200'000, 5280, 65536, 12500},   // idle 200 us: 1/16 of it
      {100'000'000, 90'000'000, 5280, 65536, 65536},  // idle for long: the long cap
      {100'000'000, 90'000'000, 5280, 5280, 5280},    // a cap given by hand stays the cap
      {3'000'000, 3'000'000, 1024, 1024, 1024},
      {10'000, 10'000, 256, 256, 256},            // a given cap under the floor is kept
  };
  canopy::device_buffer<unsigned> d_out(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    canopy::detail::scheduler_ref r{};
    r.idle_sleep_max_ns = rows[i].max_ns;
    r.idle_sleep_long_ns = rows[i].long_ns;
    idle_cap<<<1, 1>>>(r, rows[i].run_ns, rows[i].idle_ns, d_out.data() + i);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = d_out.download();
  for (std::size_t i = 0; i < rows.size(); ++i)
    EXPECT_EQ(got[i], rows[i].expected) << "row " << i << ": run " << rows[i].run_ns << " ns, idle " << rows[i].idle_ns
                                        << " ns, caps " << rows[i].max_ns << " / " << rows[i].long_ns;
}

TEST_F(GpuTest, EveryIdleSleepCapIsExact) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(3000, 4));
  for (long ns : {0L, 64L, 2048L, 100000L, 1000000L}) {
    canopy::scheduler_options opt;
    opt.idle_sleep_max = std::chrono::nanoseconds(ns);
    scheduler_contract::expect_exact_runs(g, opt, "idle sleep cap " + std::to_string(ns) + " ns", 1);
  }
}

// The GPU-only options are checked before the device is touched: these run on every machine.
TEST(GpuSchedulerOptions, GpuOnlyOptionsAreRefusedAtConstruction) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(10, 1));
  auto expect_refused = [&](const canopy::scheduler_options& o, const std::string& what) {
    try {
      canopy::gpu_scheduler s(g, o);
      ADD_FAILURE() << what << " was accepted";
    } catch (const canopy::error& e) {
      EXPECT_EQ(e.code(), canopy::status::invalid_argument) << what << ": " << e.what();
    }
  };
  for (int threads : {0, 31, 33, 1056, 2048}) {
    canopy::scheduler_options o;
    o.threads_per_block = threads;
    expect_refused(o, "threads_per_block " + std::to_string(threads));
  }
  for (long ns : {-1L, 1000001L}) {
    canopy::scheduler_options o;
    o.idle_sleep_max = std::chrono::nanoseconds(ns);
    expect_refused(o, "idle_sleep_max " + std::to_string(ns) + " ns");
  }
}

// A private queue that does not fit in a block's shared memory: known only with the device.
TEST_F(GpuTest, PrivateQueueBeyondSharedMemoryIsRefused) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(10, 1));
  canopy::scheduler_options o;
  o.private_queue_capacity = 1 << 20;  // 4 MiB of task ids
  try {
    canopy::gpu_scheduler s(g, o);
    ADD_FAILURE() << "a 4 MiB private queue was accepted";
  } catch (const canopy::error& e) {
    EXPECT_EQ(e.code(), canopy::status::invalid_argument) << e.what();
  }
}

// The dynamic shared-memory limit (above 48 KB) belongs to the kernel, not to a scheduler: a
// second scheduler with a smaller private queue lowered it under the first, whose next launch
// failed. Both must keep running, in either order, and exactly.
TEST_F(GpuTest, TwoSchedulersWithLargePrivateQueuesShareTheKernel) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(3000, 5));
  const auto expect = canopy::test::serial_sums(g);
  canopy::scheduler_options big, smaller;
  big.private_queue_capacity = 20000;      // 80 KB of task ids: above the 48 KB default limit
  smaller.private_queue_capacity = 14000;  // 56 KB: above it too, but less
  big.blocks = smaller.blocks = 4;
  canopy::gpu_scheduler a(g, big);
  workspace wa(g);
  ASSERT_TRUE(a.run(wa.ops()).ok());
  canopy::gpu_scheduler b(g, smaller);
  workspace wb(g);
  for (int rep = 0; rep < 2; ++rep) {
    const canopy::run_result rb = b.run(wb.ops());
    ASSERT_TRUE(rb.ok()) << "smaller, run " << rep << ": " << rb.message;
    const canopy::run_result ra = a.run(wa.ops());
    ASSERT_TRUE(ra.ok()) << "big after smaller, run " << rep << ": " << ra.message;
  }
  EXPECT_EQ(canopy::test::exact_run_errors(wa.read(), expect), "") << "big";
  EXPECT_EQ(canopy::test::exact_run_errors(wb.read(), expect), "") << "smaller";
}

// After an overflow the same scheduler, switched to a mode that needs no queue for a tree, runs
// the graph exactly (the CPU backend cannot change a scheduler's mode; the contract checks that a
// failed run repeats the same way and that a fresh scheduler works).
TEST_F(GpuTest, SameSchedulerRunsExactlyAfterAnOverflow) {
  const auto g = canopy::test::two_level_tree(2000);
  const auto expect = canopy::test::serial_sums(g);
  for (mode m : {mode::fixed_queue, mode::lockfree}) {
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.blocks = 2;
    opt.private_queue_capacity = 1;
    opt.shared_queue_capacity = 1;
    opt.global_queue_capacity = 1;
    canopy::gpu_scheduler s(g, opt);
    workspace w(g);
    const auto r = s.run(w.ops());
    EXPECT_EQ(r.code, canopy::status::queue_overflow) << canopy::to_string(m) << ": " << r.message;
    EXPECT_NE(r.task, canopy::no_task);
    s.set_mode(mode::continuation);
    const auto again = s.run(w.ops());
    ASSERT_TRUE(again.ok()) << again.message;
    EXPECT_EQ(canopy::test::exact_run_errors(w.read(), expect), "") << "after overflow in " << canopy::to_string(m);
  }
}

}  // namespace

namespace {

// Task 0 says it has started (mapped host memory) and waits until the host opens the gate.
struct gated_ops {
  volatile int* started;
  volatile int* gate;
  __device__ void operator()(task_id t) const {
    if (t != 0) return;
    *started = 1;
    __threadfence_system();
    while (*gate == 0) __nanosleep(1000);
  }
};

// One scheduler, two host threads: while one thread is inside run() (its run provably in flight:
// task 0 holds it until the host opens the gate), the other's run() returns invalid_argument and
// its run_async() throws it, enqueueing nothing; once the first run is over the scheduler runs
// again. Without the guard the second call would enqueue a run over the same queues and counters.
TEST_F(GpuTest, SecondThreadIsRefusedWhileARunIsInFlight) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(200, 3));
  canopy::scheduler_options opt;
  opt.mode = mode::continuation;
  opt.deadline = std::chrono::seconds(20);
  canopy::gpu_scheduler s(g, opt);
  int* host = nullptr;
  ASSERT_EQ(cudaHostAlloc(&host, 2 * sizeof(int), cudaHostAllocMapped), cudaSuccess);
  host[0] = host[1] = 0;
  int* dev = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&dev, host, 0), cudaSuccess);
  const gated_ops ops{dev, dev + 1};
  canopy::run_result first;
  std::thread a([&] { first = s.run(ops); });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (reinterpret_cast<volatile int*>(host)[0] == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  const bool started = reinterpret_cast<volatile int*>(host)[0] != 0;
  canopy::run_result second;
  bool async_refused = false;
  if (started) {
    second = s.run(ops);
    try {
      (void)s.run_async(ops);
    } catch (const canopy::error& e) {
      async_refused = e.code() == canopy::status::invalid_argument;
    }
  }
  reinterpret_cast<volatile int*>(host)[1] = 1;  // open the gate
  a.join();
  ASSERT_TRUE(started) << "the first run never reached task 0";
  EXPECT_TRUE(first.ok()) << first.message;
  EXPECT_EQ(second.code, canopy::status::invalid_argument) << second.message;
  EXPECT_NE(second.message.find("another thread"), std::string::npos) << second.message;
  EXPECT_TRUE(async_refused);
  const auto again = s.run(ops);  // the gate is open: an ordinary run
  EXPECT_TRUE(again.ok()) << again.message;
  cudaFreeHost(host);
}

}  // namespace

namespace {

// issue 18: after an overflow the same scheduler object, in the same mode, runs exactly again, and
// what the failed run left in its queues is gone after that run. The failing tree (two levels:
// a batch of sources makes many parents ready at once, queues of one slot) and a chain (one task
// ready at a time, which one slot holds) are swapped with set_graph, the scheduler kept. Which
// modes overflow on the tree is the contract's rule (TreeOverflowIsTypedUnlessTheModeNeedsNoQueue):
// continuation and the mutex mode's list need no queue space; private-queues' warp masters may
// absorb the parents.
// A DAG task whose fan-out a group pushes as bursts: with queues of one slot a burst cannot find
// room, and the run must end typed (queue_overflow, naming a task of the fan), not hang or write
// past a queue; a scheduler with queues that hold the fan then runs the graph exactly, twice.
TEST_F(GpuTest, ABurstThatFindsNoRoomIsATypedOverflow) {
  const canopy::task_graph g = wide_fan_dag(700);
  canopy::device_buffer<std::int32_t> pred_offsets{g.pred_offsets()};
  canopy::device_buffer<task_id> preds{g.predecessors()};
  canopy::device_buffer<long long> value{static_cast<std::size_t>(g.task_count())};
  canopy::device_buffer<int> lanes{static_cast<std::size_t>(g.task_count())};
  const group_sum_ops<32> op{pred_offsets.data(), preds.data(), value.data(), lanes.data()};
  const auto expect = canopy::testing::serial_values(g);
  for (const mode m : {mode::warp_rounds, mode::continuation}) {
    SCOPED_TRACE(std::string("mode ") + std::string(canopy::to_string(m)));
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.blocks = 2;
    opt.deadline = std::chrono::seconds(20);
    opt.private_queue_capacity = opt.shared_queue_capacity = opt.global_queue_capacity = 1;
    canopy::gpu_scheduler tight(g, opt);
    value.upload(std::vector<long long>(value.size(), -1));
    const canopy::run_result r = tight.run(op);
    ASSERT_FALSE(r.ok()) << "700 tasks made ready at once cannot fit queues of one slot";
    EXPECT_EQ(r.code, canopy::status::queue_overflow) << r.message;
    EXPECT_GE(r.task, 1) << r.message;
    EXPECT_LE(r.task, 700) << "the task that found no room is one of the first fan's: " << r.message;
    opt.shared_queue_capacity = opt.global_queue_capacity = 1024;
    canopy::gpu_scheduler roomy(g, opt);
    for (int rep = 0; rep < 2; ++rep) {
      value.upload(std::vector<long long>(value.size(), -1));
      const canopy::run_result ok = roomy.run(op);
      ASSERT_TRUE(ok.ok()) << "run " << rep << ": " << ok.message;
      const auto v = value.download();
      for (task_id t = 0; t < g.task_count(); ++t) ASSERT_EQ(v[t], expect[t]) << "run " << rep << ", task " << t;
    }
  }
}

TEST_F(GpuTest, SameSchedulerAndModeRunExactlyAfterAnOverflowAndItsQueuesEmpty) {
  // canopy::test::two_level_tree(500), as parents: root 0, 500 parents under it, four leaves each.
  std::vector<task_id> wide_parent(1 + 500 + 2000, canopy::no_task);
  for (int i = 1; i <= 500; ++i) wide_parent[static_cast<std::size_t>(i)] = 0;
  for (int i = 0; i < 2000; ++i) wide_parent[static_cast<std::size_t>(501 + i)] = 1 + i / 4;
  const canopy::task_graph wide = canopy::task_graph::from_parents(wide_parent);
  std::vector<task_id> chain_parent(3000);
  for (int i = 0; i < 3000; ++i) chain_parent[static_cast<std::size_t>(i)] = i + 1 < 3000 ? i + 1 : canopy::no_task;
  const canopy::task_graph chain = canopy::task_graph::from_parents(chain_parent);
  canopy::device_buffer<task_id> d_wide(wide_parent), d_chain(chain_parent);
  const auto expect_wide = canopy::test::serial_sums(wide);
  const auto expect_chain = canopy::test::serial_sums(chain);
  for (const mode m : canopy::all_modes) {
    SCOPED_TRACE(std::string("mode ") + std::string(canopy::to_string(m)));
    const auto traits = canopy::traits_of(m);
    const bool needs_no_queue = traits.linked_list_queue || traits.continuation;
    const bool either = traits.private_queues && !traits.block_fetch;
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.blocks = 2;
    opt.deadline = std::chrono::seconds(20);
    opt.private_queue_capacity = opt.shared_queue_capacity = opt.global_queue_capacity = 1;
    canopy::gpu_scheduler s(canopy::device_task_graph::from_parents(d_wide.data(), wide.task_count()), opt);
    workspace w_wide(wide), w_chain(chain);
    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      const canopy::run_result r = s.run(w_wide.ops());
      const canopy::queue_state after = s.queue_state();
      if (r.ok()) {
        ASSERT_TRUE(needs_no_queue || either) << "the tree should overflow queues of one slot";
        EXPECT_EQ(canopy::test::exact_run_errors(w_wide.read(), expect_wide), "");
        EXPECT_TRUE(after.empty()) << after.global_items << " global, " << after.shared_items << " shared left";
        EXPECT_FALSE(after.reset_pending);
      } else {
        ASSERT_FALSE(needs_no_queue) << r.message;
        ASSERT_EQ(r.code, canopy::status::queue_overflow) << r.message;
        EXPECT_TRUE(after.reset_pending) << "a failed run must leave the reset to the next run";
      }
      s.set_graph(canopy::device_task_graph::from_parents(d_chain.data(), chain.task_count()));
      for (int rep = 0; rep < 2; ++rep) {
        const canopy::run_result c = s.run(w_chain.ops());
        ASSERT_TRUE(c.ok()) << "the chain after the tree, run " << rep << ": " << c.message;
        EXPECT_EQ(canopy::test::exact_run_errors(w_chain.read(), expect_chain), "") << "run " << rep;
        const canopy::queue_state q = s.queue_state();
        EXPECT_TRUE(q.empty()) << "run " << rep << ": " << q.global_items << " global, " << q.shared_items
                               << " shared, list " << (q.list_empty ? "empty" : "not empty");
        EXPECT_FALSE(q.reset_pending) << "run " << rep;
      }
      s.set_graph(canopy::device_task_graph::from_parents(d_wide.data(), wide.task_count()));
    }
  }
}

}  // namespace
