// SPDX-License-Identifier: Apache-2.0
// The dependency graph a scheduler runs: a tree (each task has at most one successor, its parent)
// or a general DAG (successors in CSR form). Host owner `task_graph` validates its input once;
// `task_graph_ref` is the trivially copyable view the workers read.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "canopy/config.hpp"
#include "canopy/status.hpp"

namespace canopy {

/// View of a graph's arrays (device or host memory). Counters in `pending` equal
/// `dependency_count` between runs: the task that brings a counter to zero resets it.
struct task_graph_ref {
  std::int32_t task_count;
  const task_id* parent;              // tree form: the single successor, or no_task (succ_offsets == nullptr)
  const std::int32_t* succ_offsets;   // DAG form: successors of t are succ[succ_offsets[t] .. succ_offsets[t+1])
  const task_id* succ;
  const std::int32_t* dependency_count;
  std::int32_t* pending;
  const task_id* sources;             // tasks with no dependencies, in a locality-friendly order
  std::int32_t source_count;
  std::int32_t sink_count;            // tasks with no successors; the run ends when all have finished

  friend bool operator==(const task_graph_ref&, const task_graph_ref&) = default;
};
static_assert(std::is_trivially_copyable_v<task_graph_ref>);

class task_graph {
 public:
  /// A forest: parent[t] is t's successor (no_task for a root). `sources_order`, if given, lists
  /// the leaves in the order the workers should claim them (Morton order for an octree: siblings
  /// adjacent, so the last arriver of a parent usually sits in the same block as its siblings).
  static task_graph from_parents(std::span<const task_id> parent, std::span<const task_id> sources_order = {});

  /// A DAG of `task_count` tasks; edge (a, b) means b depends on a. Cycles, self-loops, duplicate
  /// edges and out-of-range ids are rejected with canopy::error naming the tasks.
  static task_graph from_edges(std::int32_t task_count, std::span<const std::pair<task_id, task_id>> edges);

  std::int32_t task_count() const { return task_count_; }
  bool is_tree() const { return succ_offsets_.empty(); }
  const std::vector<task_id>& parent() const { return parent_; }
  const std::vector<std::int32_t>& succ_offsets() const { return succ_offsets_; }
  const std::vector<task_id>& successors() const { return succ_; }
  const std::vector<std::int32_t>& pred_offsets() const { return pred_offsets_; }
  const std::vector<task_id>& predecessors() const { return pred_; }
  const std::vector<std::int32_t>& dependency_count() const { return dependency_count_; }
  const std::vector<task_id>& sources() const { return sources_; }
  std::int32_t sink_count() const { return sink_count_; }

  /// Host view over this object's own arrays (the CPU backend runs on it). `pending` is the
  /// caller's working copy of dependency_count().
  task_graph_ref host_ref(std::int32_t* pending) const;

  /// Testing hook: make `t` wait for one dependency that never finishes, so a run must end in
  /// status::timeout naming `t`. (How the timeout path is tested; never needed otherwise.)
  void withhold_dependency(task_id t);

  /// After a failed run: the first task, in dependency order, that some predecessor reached but
  /// that never became ready, judged from the final counters. no_task if none is found.
  task_id find_stuck_task(std::span<const std::int32_t> pending) const;

 private:
  void finish();  // derive predecessors, dependency counts, sources and sinks

  std::int32_t task_count_ = 0;
  std::vector<task_id> parent_;
  std::vector<std::int32_t> succ_offsets_;
  std::vector<task_id> succ_;
  std::vector<std::int32_t> pred_offsets_;
  std::vector<task_id> pred_;
  std::vector<std::int32_t> dependency_count_;
  std::vector<task_id> sources_;
  std::int32_t sink_count_ = 0;
};

}  // namespace canopy
