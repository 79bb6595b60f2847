// SPDX-License-Identifier: Apache-2.0
// The operation every scheduler contract test runs, its references, and the graphs with a
// closed-form answer. Portable (g++ and nvcc): the one op body runs on CPU workers and in the
// persistent kernel, so both backends are held to the same oracle.
//
// The op: value[t] = 1 + the sum of value over t's predecessors (wrapping uint64: no overflow
// UB on deep DAGs), runs[t] counts executions, `early` counts predecessor reads made before that
// predecessor had finished. On a tree value[t] is the size of t's subtree, so the sum over the
// roots is the task count. Values are poisoned before each run (poison_value), so a task that
// read a predecessor too early, or never ran, differs from the reference.
#pragma once

#include <cuda/atomic>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "canopy/config.hpp"
#include "canopy/task_graph.hpp"
#include "scheduler_test_graphs.hpp"

namespace canopy::test {

inline constexpr std::uint64_t poison_value = 0;  // every real value is >= 1

struct oracle_ops {
  const std::int32_t* pred_offsets;
  const task_id* preds;
  std::uint64_t* value;
  unsigned* runs;
  unsigned* early;
  // Plain loads and stores of `value`: the scheduler's release/acquire ordering is what makes them
  // safe, so ThreadSanitizer (CPU) and the value check (both backends) catch a missing one.
  CANOPY_HD void operator()(task_id t) const {
    std::uint64_t s = 1;
    for (std::int32_t j = pred_offsets[t]; j < pred_offsets[t + 1]; ++j) {
      const task_id p = preds[j];
      if (cuda::atomic_ref<unsigned, cuda::thread_scope_device>(runs[p]).load(cuda::std::memory_order_relaxed) != 1)
        cuda::atomic_ref<unsigned, cuda::thread_scope_device>(*early).fetch_add(1, cuda::std::memory_order_relaxed);
      s += value[p];
    }
    value[t] = s;
    cuda::atomic_ref<unsigned, cuda::thread_scope_device>(runs[t]).fetch_add(1, cuda::std::memory_order_relaxed);
  }
};

/// The same op declaring tree_only (canopy/detail/dependency.hpp): run on a tree, it goes through
/// the code compiled for Ops that run on trees only (the tree-only kernels; warp-rounds' own loop,
/// which other Ops never reach).
struct tree_oracle_ops : oracle_ops {
  static constexpr bool tree_only = true;
};

/// What a run left in the op's outputs (read back after the run).
struct outcome {
  std::vector<std::uint64_t> value;
  std::vector<unsigned> runs;
  unsigned early = 0;
};

/// The op's value computed serially in topological order (Kahn); the poison where a withheld
/// dependency stops the order.
inline std::vector<std::uint64_t> serial_sums(const task_graph& g) {
  return canopy::testing::serial_values<std::uint64_t>(g, poison_value);
}

/// "" when every task ran exactly once, never early, with its expected value; else what is wrong.
inline std::string exact_run_errors(const outcome& o, const std::vector<std::uint64_t>& expect) {
  std::size_t missing = 0, repeated = 0, wrong = 0;
  task_id first = no_task;
  for (std::size_t t = 0; t < expect.size(); ++t) {
    missing += o.runs[t] == 0;
    repeated += o.runs[t] > 1;
    wrong += o.runs[t] == 1 && o.value[t] != expect[t];
    if ((o.runs[t] != 1 || o.value[t] != expect[t]) && first == no_task) first = static_cast<task_id>(t);
  }
  if (missing + repeated + wrong == 0 && o.early == 0) return {};
  return std::to_string(missing) + " tasks never ran, " + std::to_string(repeated) + " ran more than once, " +
         std::to_string(wrong) + " wrong values, " + std::to_string(o.early) + " early reads; first bad task " +
         std::to_string(first) + (first == no_task ? "" : " (runs " + std::to_string(o.runs[static_cast<std::size_t>(first)]) +
                                                         ", value " + std::to_string(o.value[static_cast<std::size_t>(first)]) +
                                                         ", expected " + std::to_string(expect[static_cast<std::size_t>(first)]) + ")");
}

/// After a failed run: "" when no task ran twice, none read a predecessor early, every task that
/// ran has its expected value (when `expect` is given), and no task in `never` ran. A failure
/// stops a run; it never repeats or reorders work.
inline std::string failed_run_errors(const outcome& o, const std::vector<task_id>& never = {},
                                     const std::vector<std::uint64_t>& expect = {}) {
  std::size_t repeated = 0, wrong = 0;
  for (std::size_t t = 0; t < o.runs.size(); ++t) {
    repeated += o.runs[t] > 1;
    wrong += !expect.empty() && o.runs[t] == 1 && o.value[t] != expect[t];
  }
  std::string e;
  if (repeated != 0) e += std::to_string(repeated) + " tasks ran more than once; ";
  if (wrong != 0) e += std::to_string(wrong) + " tasks that ran have wrong values; ";
  if (o.early != 0) e += std::to_string(o.early) + " early reads; ";
  for (task_id t : never)
    if (o.runs[static_cast<std::size_t>(t)] != 0) e += "task " + std::to_string(t) + " ran though it could never be ready; ";
  return e;
}

/// `t` and every task that depends on it, directly or not.
inline std::vector<task_id> dependents_of(const task_graph& g, task_id t) {
  std::vector<char> seen(static_cast<std::size_t>(g.task_count()), 0);
  std::vector<task_id> out{t};
  seen[static_cast<std::size_t>(t)] = 1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    auto visit = [&](task_id s) {
      if (!seen[static_cast<std::size_t>(s)]) seen[static_cast<std::size_t>(s)] = 1, out.push_back(s);
    };
    const task_id x = out[i];
    if (g.is_tree()) {
      if (g.parent()[x] != no_task) visit(g.parent()[x]);
    } else {
      for (std::int32_t j = g.succ_offsets()[x]; j < g.succ_offsets()[x + 1]; ++j) visit(g.successors()[j]);
    }
  }
  return out;
}

// ---- graphs with a closed-form answer --------------------------------------------------------

/// A chain: task i depends on task i - 1, so value[i] = i + 1 and the values sum to n(n+1)/2.
inline std::vector<task_id> chain_parents(std::int32_t n) {
  std::vector<task_id> parent(static_cast<std::size_t>(n), no_task);
  for (std::int32_t i = 0; i + 1 < n; ++i) parent[static_cast<std::size_t>(i)] = i + 1;
  return parent;
}

/// A star: every other task is a leaf of root 0, all ready at once; value[0] = n, leaves 1.
inline std::vector<task_id> star_parents(std::int32_t n) {
  std::vector<task_id> parent(static_cast<std::size_t>(n), 0);
  if (n > 0) parent[0] = no_task;
  return parent;
}

/// The complete k-ary tree of the given depth in heap order (children of i: k*i+1 .. k*i+k).
/// A node on level L has value (k^(depth-L+1) - 1) / (k - 1): its subtree's size.
inline std::vector<task_id> complete_parents(int k, int depth) {
  std::int64_t n = 0, level = 1;
  for (int d = 0; d <= depth; ++d, level *= k) n += level;
  std::vector<task_id> parent(static_cast<std::size_t>(n), no_task);
  for (std::int64_t i = 1; i < n; ++i) parent[static_cast<std::size_t>(i)] = static_cast<task_id>((i - 1) / k);
  return parent;
}

inline std::uint64_t complete_subtree_size(int k, int depth, int level) {
  std::uint64_t size = 0, width = 1;
  for (int d = level; d <= depth; ++d, width *= static_cast<std::uint64_t>(k)) size += width;
  return size;
}

/// Task 0 makes `fan` tasks ready at once (DAG form): with one worker and queues of capacity 1,
/// no mode with fixed queues has room for them.
inline task_graph fan_out(std::int32_t fan) {
  std::vector<std::pair<task_id, task_id>> edges;
  for (task_id t = 1; t <= fan; ++t) edges.emplace_back(0, t);
  return task_graph::from_edges(fan + 1, edges);
}

/// Root 0, `parents` internal tasks under it, four leaves under each: a batch of sources makes
/// many parents ready together. With one worker and queues of capacity 1 every mode that queues
/// a tree's parents overflows; continuation runs them itself.
inline task_graph two_level_tree(std::int32_t parents) {
  std::vector<task_id> parent(static_cast<std::size_t>(1 + parents + 4 * parents), no_task);
  for (std::int32_t i = 1; i <= parents; ++i) parent[static_cast<std::size_t>(i)] = 0;
  for (std::int32_t i = 0; i < 4 * parents; ++i) parent[static_cast<std::size_t>(1 + parents + i)] = 1 + i / 4;
  return task_graph::from_parents(parent);
}

}  // namespace canopy::test
