// SPDX-License-Identifier: Apache-2.0
// The per-element steps of canopy::device_task_graph (canopy/detail/graph_build_steps.hpp), driven
// by host loops in the order the kernels run them, so that the build's logic and its messages are
// tested in CI without a GPU: the graphs must equal task_graph::from_parents element for element,
// and bad input must give the same one-line messages the GPU test expects. (White-box: includes
// detail/.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "canopy/detail/graph_build_steps.hpp"
#include "canopy/task_graph.hpp"
#include "child_arrays.hpp"
#include "scheduler_test_graphs.hpp"

namespace {

namespace gb = canopy::detail::graph_build;
using canopy::no_task;
using canopy::task_graph;
using canopy::task_id;

enum class cycles { automatic, always, never };  // as canopy::cycle_check, which lives in the .cuh

struct built {
  std::vector<task_id> parent;
  std::vector<std::int32_t> dependency_count;
  std::vector<task_id> sources;
  std::int32_t sink_count = 0;
  std::string error;  // the message a device build would throw; empty when it succeeds
  bool cycle_check_ran = false;
};

// The host twin of device_task_graph::build::finish: the order check, the decisions after the
// one read, the cycle check and the sources.
void finish(built& b, unsigned long long fault, std::int32_t leaves, unsigned id_order, const std::vector<task_id>* order,
            cycles c, const std::vector<std::int32_t>& first_child, const std::vector<std::int32_t>& child_count,
            const std::vector<std::int32_t>& hi) {
  const auto n = static_cast<std::int32_t>(b.parent.size());
  // The scratch words as the device build lays them out: first_index in A, then the cycle
  // check's ping-pong in A and B, so that a message read after the cycle check would be wrong here too.
  std::vector<std::int32_t> words(2 * static_cast<std::size_t>(n) + 2, -7);
  std::int32_t* const first_index = words.data();
  std::fill(first_index, first_index + n, INT32_MAX);
  if (order != nullptr) {
    const auto count = static_cast<std::int32_t>(order->size());
    for (std::int32_t i = 0; i < count; ++i) {
      const task_id s = (*order)[static_cast<std::size_t>(i)];
      const auto key = gb::check_source(i, s, n, b.dependency_count.data());
      fault = std::min(fault, key);
      if (key == gb::no_fault) first_index[s] = std::min(first_index[s], i);
    }
    for (std::int32_t i = 0; i < count; ++i) {
      const task_id s = (*order)[static_cast<std::size_t>(i)];
      if (gb::check_source(i, s, n, b.dependency_count.data()) != gb::no_fault) continue;
      fault = std::min(fault, gb::check_source_repeat(i, first_index[s]));
    }
  }
  auto describe = [&](unsigned long long key) {
    const std::int32_t w = gb::key_where(key);
    const auto ws = static_cast<std::size_t>(w);
    gb::fault_details d;
    switch (gb::key_fault(key)) {
      case gb::fault::parent_out_of_range: d.a = b.parent[ws]; break;
      case gb::fault::negative_child_count: d.a = child_count[ws]; break;
      case gb::fault::children_out_of_range:
      case gb::fault::own_child: d.a = first_child[ws], d.b = child_count[ws]; break;
      case gb::fault::two_parents: d.a = b.parent[ws], d.b = hi[ws]; break;
      case gb::fault::order_out_of_range: d.a = (*order)[ws]; break;
      case gb::fault::order_not_leaf:
        d.a = (*order)[ws];
        d.b = b.dependency_count[static_cast<std::size_t>(d.a)];
        break;
      case gb::fault::order_duplicate:
        d.a = (*order)[ws];
        d.b = first_index[d.a];
        break;
      default: break;
    }
    return gb::fault_message(key, d, n);
  };
  const bool check = c == cycles::always || (c == cycles::automatic && !gb::ids_prove_acyclic(id_order));
  std::string message;
  if (fault != gb::no_fault) {
    message = describe(fault);
    if (gb::fault_class(gb::key_fault(fault)) == 0) {
      b.error = message;
      return;
    }
  }
  if (check) {
    b.cycle_check_ran = true;
    task_id* next = words.data();
    task_id* out = words.data() + n;
    for (task_id t = 0; t < n; ++t) next[t] = gb::jump_start(t, b.parent[static_cast<std::size_t>(t)]);
    for (int r = gb::jump_rounds(n); r > 0; --r) {
      for (task_id t = 0; t < n; ++t) out[t] = next[next[t]];
      std::swap(next, out);
    }
    unsigned long long key = gb::no_fault;
    for (task_id t = 0; t < n; ++t) key = std::min(key, gb::check_reaches_root(t, b.parent[static_cast<std::size_t>(next[t])]));
    if (key != gb::no_fault) {
      b.error = gb::fault_message(key, {}, n, gb::find_cycle(b.parent, gb::key_where(key)));
      return;
    }
  }
  if (fault != gb::no_fault) {
    b.error = message;
    return;
  }
  if (order != nullptr && static_cast<std::int32_t>(order->size()) != leaves) {
    b.error = gb::source_count_message(static_cast<std::int32_t>(order->size()), leaves);
    return;
  }
  if (order != nullptr) b.sources = *order;
  else
    for (task_id t = 0; t < n; ++t)
      if (b.dependency_count[static_cast<std::size_t>(t)] == 0) b.sources.push_back(t);
}

// parents_kernel + count_leaves_kernel, one task per iteration.
built from_parents(const std::vector<task_id>& in, const std::vector<task_id>* order = nullptr, cycles c = cycles::automatic) {
  const auto n = static_cast<std::int32_t>(in.size());
  built b;
  b.parent = in;
  b.dependency_count.assign(in.size(), 0);
  unsigned long long fault = gb::no_fault;
  unsigned id_order = 0;
  for (task_id t = 0; t < n; ++t) {
    const task_id p = in[static_cast<std::size_t>(t)];
    const auto key = gb::check_parent(t, p, n);
    fault = std::min(fault, key);
    const bool edge = key == gb::no_fault && p != no_task;
    if (edge) ++b.dependency_count[static_cast<std::size_t>(p)];
    if (p == no_task) ++b.sink_count;
    id_order |= edge ? gb::id_order_bits(t, p) : 0u;
  }
  const auto leaves = static_cast<std::int32_t>(std::count(b.dependency_count.begin(), b.dependency_count.end(), 0));
  finish(b, fault, leaves, id_order, order, c, {}, {}, {});
  return b;
}

// children_kernel, the scan, slots_kernel, settle_kernel.
built from_children(const std::vector<std::int32_t>& first_child, const std::vector<std::int32_t>& child_count,
                    const std::vector<task_id>* order = nullptr, cycles c = cycles::automatic) {
  const auto n = static_cast<std::int32_t>(child_count.size());
  const auto size = child_count.size();
  built b;
  b.dependency_count = child_count;
  unsigned long long fault = gb::no_fault;
  std::int32_t leaves = 0;
  std::vector<std::int64_t> offsets(size + 1, 0);
  for (task_id p = 0; p < n; ++p) {
    const std::int32_t k = child_count[static_cast<std::size_t>(p)];
    const std::int32_t f = k > 0 ? first_child[static_cast<std::size_t>(p)] : 0;
    fault = std::min(fault, gb::check_children(p, f, k, n));
    leaves += k == 0;
    offsets[static_cast<std::size_t>(p) + 1] = offsets[static_cast<std::size_t>(p)] + gb::usable_children(p, f, k, n);
  }
  std::vector<std::int32_t> lo(size, gb::no_parent_yet), hi(size, gb::no_parent_max);
  const std::int64_t slots = gb::slots_to_visit(offsets[size], n);
  for (std::int64_t e = 0; e < slots; ++e) {
    const task_id p = gb::slot_parent(offsets.data(), n, e);
    const std::int32_t ch = first_child[static_cast<std::size_t>(p)] + static_cast<std::int32_t>(e - offsets[static_cast<std::size_t>(p)]);
    lo[static_cast<std::size_t>(ch)] = std::min(lo[static_cast<std::size_t>(ch)], p);
    hi[static_cast<std::size_t>(ch)] = std::max(hi[static_cast<std::size_t>(ch)], p);
  }
  b.parent.assign(size, no_task);
  unsigned id_order = 0;
  for (task_id t = 0; t < n; ++t) {
    task_id p = no_task;
    fault = std::min(fault, gb::settle_parent(t, lo[static_cast<std::size_t>(t)], hi[static_cast<std::size_t>(t)], p));
    b.parent[static_cast<std::size_t>(t)] = p;
    b.sink_count += p == no_task;
    id_order |= gb::id_order_bits(t, p);
  }
  finish(b, fault, leaves, id_order, order, c, first_child, child_count, hi);
  return b;
}

void expect_matches(const built& b, const task_graph& h) {
  ASSERT_EQ(b.error, "");
  EXPECT_EQ(b.parent, h.parent());
  EXPECT_EQ(b.dependency_count, h.dependency_count());
  EXPECT_EQ(b.sources, h.sources());
  EXPECT_EQ(b.sink_count, h.sink_count());
}

std::vector<task_id> shuffled_sources(const task_graph& h, std::uint64_t seed) {
  std::vector<task_id> s = h.sources();
  std::shuffle(s.begin(), s.end(), std::mt19937_64(seed));
  return s;
}

const std::int32_t sizes[] = {0, 1, 2, 7, 33, 257, 5000};

TEST(GraphBuildSteps, RandomTreesFromParentsMatchTheHostGraph) {
  std::uint64_t seed = 1;
  for (const std::int32_t n : sizes)
    for (const int window : {0, 3}) {
      const auto ordered = canopy::testing::random_tree_parents(n, seed++, window);
      const auto shuffled = canopy::testing::shuffle_ids(ordered, seed++);
      for (const cycles c : {cycles::automatic, cycles::always, cycles::never}) {
        SCOPED_TRACE("n=" + std::to_string(n) + " window=" + std::to_string(window) + " check=" + std::to_string(int(c)));
        expect_matches(from_parents(ordered, nullptr, c), task_graph::from_parents(ordered));
        expect_matches(from_parents(shuffled, nullptr, c), task_graph::from_parents(shuffled));
        const std::vector<task_id> order = shuffled_sources(task_graph::from_parents(shuffled), seed++);
        expect_matches(from_parents(shuffled, &order, c), task_graph::from_parents(shuffled, order));
      }
      // Ids that run one way prove the forest acyclic: the automatic check costs nothing then.
      EXPECT_FALSE(from_parents(ordered).cycle_check_ran);
      if (n > 100) {
        EXPECT_TRUE(from_parents(shuffled).cycle_check_ran) << "a shuffled tree of " << n << " tasks";
      }
    }
}

TEST(GraphBuildSteps, ChildArraysMatchTheHostGraph) {
  std::uint64_t seed = 200;
  for (const std::int32_t n : sizes)
    for (const int max_children : {0, 1, 2, 8, 40})
      for (const std::int32_t roots : {1, 5})
        for (const bool shuffle : {false, true}) {
          SCOPED_TRACE("n=" + std::to_string(n) + " max_children=" + std::to_string(max_children) + " roots=" +
                       std::to_string(roots) + " shuffled=" + std::to_string(shuffle));
          const auto a = canopy::testing::random_child_arrays(n, seed++, max_children, roots, shuffle);
          const task_graph h = task_graph::from_parents(a.parent);
          expect_matches(from_children(a.first_child, a.child_count), h);
          expect_matches(from_children(a.first_child, a.child_count, nullptr, cycles::always), h);
          const std::vector<task_id> order = shuffled_sources(h, seed++);
          expect_matches(from_children(a.first_child, a.child_count, &order), task_graph::from_parents(a.parent, order));
          if (!shuffle) {
            EXPECT_FALSE(from_children(a.first_child, a.child_count).cycle_check_ran);
          }
        }
}

TEST(GraphBuildSteps, TheOctreeLayoutIsItsOwnAcyclicityProof) {
  // Breadth-first numbering, as build_octree: every parent below its children.
  const auto a = canopy::testing::random_child_arrays(100000, 5, 8, 1, false);
  const built b = from_children(a.first_child, a.child_count);
  EXPECT_FALSE(b.cycle_check_ran);
  expect_matches(b, task_graph::from_parents(a.parent));
}

TEST(GraphBuildSteps, SlotParentSkipsTasksWithoutChildren) {
  // counts 0, 2, 0, 0, 3, 0 -> offsets 0 0 2 2 2 5 5
  const std::vector<std::int64_t> offsets = {0, 0, 2, 2, 2, 5, 5};
  const std::vector<task_id> want = {1, 1, 4, 4, 4};
  for (std::int64_t e = 0; e < 5; ++e) EXPECT_EQ(gb::slot_parent(offsets.data(), 6, e), want[static_cast<std::size_t>(e)]) << e;
  EXPECT_EQ(gb::slots_to_visit(5, 6), 5);
  EXPECT_EQ(gb::slots_to_visit(std::int64_t{1} << 40, 6), 7);  // overlapping ranges: n + 1 slots at most
}

TEST(GraphBuildSteps, PointerJumpingReachesTheRootOfTheLongestChain) {
  // Chains of 2^k and 2^k + 1 tasks: one round fewer than jump_rounds would leave some unreached.
  for (const std::int32_t n : {1, 2, 3, 4, 5, 6, 64, 65, 1000, 1024, 1025}) {
    std::vector<task_id> chain(static_cast<std::size_t>(n));
    for (std::int32_t t = 0; t < n; ++t) chain[static_cast<std::size_t>(t)] = t + 1 < n ? t + 1 : no_task;  // parent above
    EXPECT_EQ(from_parents(chain, nullptr, cycles::always).error, "") << n;
    EXPECT_EQ(from_parents(canopy::testing::shuffle_ids(chain, 3), nullptr, cycles::always).error, "") << n;
  }
  EXPECT_EQ(gb::jump_rounds(0), 0);
  EXPECT_EQ(gb::jump_rounds(1), 0);
  EXPECT_EQ(gb::jump_rounds(2), 1);
  EXPECT_EQ(gb::jump_rounds(4), 2);
  EXPECT_EQ(gb::jump_rounds(5), 3);
  EXPECT_GE(std::int64_t{1} << gb::jump_rounds(INT32_MAX - 1), std::int64_t{INT32_MAX} - 2);
}

TEST(GraphBuildSteps, KeysOrderGraphFaultsFirstThenSmallerTasks) {
  const auto graph = gb::make_key(gb::fault::parent_out_of_range, 7);
  EXPECT_LT(gb::make_key(gb::fault::own_parent, 3), graph);
  EXPECT_LT(graph, gb::make_key(gb::fault::own_parent, 8));
  EXPECT_LT(gb::make_key(gb::fault::two_parents, INT32_MAX - 1), gb::make_key(gb::fault::cycle, 0));
  EXPECT_LT(gb::make_key(gb::fault::cycle, INT32_MAX - 1), gb::make_key(gb::fault::order_out_of_range, 0));
  EXPECT_LT(gb::make_key(gb::fault::order_duplicate, INT32_MAX - 1), gb::no_fault);
  EXPECT_EQ(gb::key_where(gb::make_key(gb::fault::order_duplicate, INT32_MAX - 1)), INT32_MAX - 1);
  EXPECT_EQ(gb::key_fault(gb::make_key(gb::fault::order_duplicate, 5)), gb::fault::order_duplicate);
  EXPECT_EQ(gb::key_fault(gb::no_fault), gb::fault::none);
}

// The same inputs and messages as tests/gpu/runtime/device_task_graph_gpu_test.cu.
TEST(GraphBuildSteps, BadParentsAndCyclesAreNamed) {
  EXPECT_EQ(from_parents({no_task, 0, 2, 0}).error, "device task graph: task 2 is its own parent");
  EXPECT_EQ(from_parents({no_task, 0, 0, 7, 1}).error, "device task graph: task 3 has parent 7, out of range (5 tasks)");
  EXPECT_EQ(from_parents({no_task, -2}).error, "device task graph: task 1 has parent -2, out of range (2 tasks)");
  std::vector<task_id> many = canopy::testing::random_tree_parents(100000, 3);
  many[70001] = 70001;
  many[40000] = 100000;
  many[99999] = -5;
  EXPECT_EQ(from_parents(many).error, "device task graph: task 40000 has parent 100000, out of range (100000 tasks)");

  EXPECT_EQ(from_parents({no_task, 2, 3, 1}).error, "device task graph: cycle 1 -> 2 -> 3 -> 1");
  EXPECT_EQ(from_parents({1, 0}).error, "device task graph: cycle 0 -> 1 -> 0");
  EXPECT_EQ(from_parents({no_task, 2, 3, 2}, nullptr, cycles::always).error,
            "device task graph: cycle 2 -> 3 -> 2 (task 1 leads into it and never reaches a root)");
  EXPECT_EQ(from_parents({no_task, 2, 3, 1}, nullptr, cycles::never).error, "");
  std::vector<task_id> big = canopy::testing::shuffle_ids(canopy::testing::random_tree_parents(200000, 11), 12);
  big[150000] = 150001;
  big[150001] = 150002;
  big[150002] = 150000;
  const std::string what = from_parents(big).error;
  EXPECT_NE(what.find("cycle 150000 -> 150001 -> 150002 -> 150000"), std::string::npos) << what;
  // The host graph agrees that these are refused.
  EXPECT_THROW(task_graph::from_parents(big), canopy::error);
}

TEST(GraphBuildSteps, BadChildRangesAreNamed) {
  EXPECT_EQ(from_children({1, -1, -1}, {-2, 0, 0}).error, "device task graph: task 0 has child_count -2");
  EXPECT_EQ(from_children({1, -1, -1}, {3, 0, 0}).error,
            "device task graph: task 0 has children 1..3 (first_child 1, child_count 3), out of range (3 tasks)");
  EXPECT_EQ(from_children({1, 0, -1}, {2, 2, 0}).error, "device task graph: task 1 is its own child (children 0..1)");
  EXPECT_EQ(from_children({2, 2, -1, -1}, {2, 1, 0, 0}).error, "device task graph: task 2 is a child of both task 0 and task 1");
  const std::int32_t n = 100000;
  std::vector<std::int32_t> first(n, n / 2), count(n, 0);
  for (std::int32_t t = 0; t < n / 2; ++t) count[static_cast<std::size_t>(t)] = n / 2;
  EXPECT_EQ(from_children(first, count).error, "device task graph: task 50000 is a child of both task 0 and task 2");
  // A cycle through child ranges: 0 -> 1 -> 0 (each the other's child), task 2 a root.
  EXPECT_EQ(from_children({1, 0, -1}, {1, 1, 0}).error, "device task graph: cycle 0 -> 1 -> 0");
}

TEST(GraphBuildSteps, BadSourcesOrdersAreNamed) {
  const std::vector<task_id> parent = {no_task, 0, 0, 1, 1};
  auto order_error = [&parent](std::vector<task_id> order) { return from_parents(parent, &order).error; };
  EXPECT_EQ(order_error({3, 4, 2}), "");
  EXPECT_EQ(order_error({3, 9, 2}), "device task graph: sources_order[1] = 9 is not a task (5 tasks)");
  EXPECT_EQ(order_error({3, 4, 1}),
            "device task graph: sources_order[2] = task 1, which has 2 children (the sources are the tasks without children)");
  EXPECT_EQ(order_error({3, 4, 3}), "device task graph: sources_order[2] = task 3 repeats sources_order[0]");
  EXPECT_EQ(order_error({3, 4}), "device task graph: sources_order has 2 entries, but 3 tasks have no children");
  EXPECT_EQ(order_error({}), "device task graph: sources_order has 0 entries, but 3 tasks have no children");
  const std::vector<task_id> two = {0, 1};
  EXPECT_EQ(from_parents({}, &two).error, "device task graph: sources_order[0] = 0 is not a task (0 tasks)");
  const std::vector<task_id> order = {9, 9};
  EXPECT_EQ(from_parents({no_task, 0, 7, 1, 1}, &order).error, "device task graph: task 2 has parent 7, out of range (5 tasks)");
  // Ids that do not prove acyclicity: the cycle check runs after the order check, on the same
  // scratch, and the message must still name the first index of the repeated entry.
  const std::vector<task_id> mixed = {2, 2, no_task, 0, 0};  // leaves 1, 3, 4
  const std::vector<task_id> repeat = {4, 3, 4};
  const built r = from_parents(mixed, &repeat);
  EXPECT_TRUE(r.cycle_check_ran);
  EXPECT_EQ(r.error, "device task graph: sources_order[2] = task 4 repeats sources_order[0]");
  // A bad order loses to a cycle too.
  const std::vector<task_id> not_a_leaf = {1};
  EXPECT_EQ(from_parents({no_task, 2, 3, 1}, &not_a_leaf).error, "device task graph: cycle 1 -> 2 -> 3 -> 1");
  EXPECT_EQ(gb::source_count_message(1, 1), "device task graph: sources_order has 1 entry, but 1 task has no children");
}

}  // namespace
