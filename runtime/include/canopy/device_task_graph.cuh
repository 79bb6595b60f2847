// SPDX-License-Identifier: Apache-2.0
// A tree's task graph built on the device from device arrays, with no host copy of the tree: the
// dependency counts, the sources and the graph view come from kernels. For a tree that is already
// on the GPU (the device octree: parent, or first_child + child_count, and its Morton-ordered
// leaves). A graph that lives on the host keeps using canopy::task_graph.
//
//   canopy::device_task_graph g = canopy::device_task_graph::from_children(
//       tree.first_child, tree.child_count, tree.node_count, stream, tree.leaves, tree.leaf_count);
//   g.task_count(); g.source_count(); g.sink_count();       // host values, for the launch
//   canopy::task_graph_ref r = g.ref(pending);              // the device view the workers read
//
// The graph is the same as task_graph::from_parents of the same arrays would give (a test checks
// it element for element): dependency_count[t] = t's children, the sources = the tasks without
// children (in the caller's order, else ascending ids), sink_count = the roots. Bad input is
// refused with canopy::error(status::invalid_argument, "device task graph: ...") naming the
// smallest bad task; CUDA failures throw canopy::cuda_error.
//
// Cost of a build, on `stream`: a handful of O(n) kernels (plus a CUB scan over n + 1 counts for
// from_children, and a CUB select over n ids when no sources order is given), then ONE small
// device-to-host read (the fault key, sink and source counts: the host needs them to size the
// sources and to launch), then a cudaStreamSynchronize at the end, so the graph is complete on
// return and any stream may use it. The cycle check, when it must run, adds bit_width(n - 1) gather
// passes over n ints and a second small read. Scratch (see device_graph_workspace): from_parents
// 8n bytes while the cycle check may run, else 4n for a sources order, else none; from_children
// 12n + 8 bytes; plus CUB's few KB. Output: 8n bytes + 4 per source.
//
// from_trusted_forest skips all of it for arrays the caller built itself and vouches for (the GPU
// octree builder's tree): three device-to-device copies on `stream`, no kernel, no host wait. Such
// a graph is complete in `stream`'s order only: it records an event (ready_event()) that
// gpu_scheduler's constructor and set_graph wait for on their own stream, and download() on the
// host; anything else reading its arrays from another stream must wait for that event itself.
//
// from_trusted_dag takes a general DAG in the scheduler's form (successors in CSR) that the caller
// built on the device, the way from_trusted_forest takes a forest: the FMM's task DAG, whose lists
// are made by kernels, reaches the scheduler with no host copy this way.
//
// Header-only, like gpu_scheduler.cuh: nvcc only (kernels are templates, so that any number of
// translation units may include it). This header is the API; the definitions, the build's kernels
// among them, are in canopy/detail/device_task_graph.inl, included at its end.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "canopy/config.hpp"
#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/error.hpp"
#include "canopy/status.hpp"
#include "canopy/task_graph.hpp"

namespace canopy {

/// Whether a build proves that the parent relation has no cycle. It matters: the scheduler's
/// timeout does NOT catch a cycle in a forest. Tasks on a cycle, and the tasks leading into it,
/// never become ready, but no root waits for them (a cycle has no root), so a run ends ok when
/// the real roots are done, without ever running them.
enum class cycle_check : std::uint8_t {
  /// Free when the ids prove it: every parent id below its child's id (the octree's level order)
  /// or every one above; the build's single read tells. Otherwise the full check runs.
  automatic,
  /// Always pointer jumping: bit_width(n - 1) passes of next[t] = next[next[t]] over n ints (random
  /// gathers; about 24 passes at n = 10 M), then a second small read.
  always,
  /// The caller vouches that the input is a forest (see above for what a cycle would do).
  never,
};

/// Grow-only device scratch for builds, so that repeated builds (a tree rebuilt every step)
/// allocate no scratch after the first: without one, each build cudaMallocs its own and frees it
/// at the end, and cudaFree waits for the whole device. One build at a time per workspace (a
/// build is done with it when it returns, so builds on different streams may take turns).
class device_graph_workspace {
 public:
  device_graph_workspace() = default;
  /// Bytes held now.
  std::size_t bytes() const noexcept { return buffer_.size(); }
  /// At least `bytes`; the contents are not kept when it grows.
  std::byte* reserve(std::size_t bytes);

 private:
  device_buffer<std::byte> buffer_;
};

/// How a checked build (from_parents, from_children) runs.
struct device_graph_options {
  cycle_check cycles = cycle_check::automatic;
  device_graph_workspace* workspace = nullptr;  ///< reused scratch; nullptr: a temporary one
};

/// A forest's task graph in device memory (see the top of this file). Move-only; a moved-from
/// graph is empty.
class device_task_graph {
 public:
  /// An empty graph (no tasks).
  device_task_graph() = default;

  /// A forest from d_parent[t] (no_task for a root), n tasks in device memory, read on `stream`.
  /// The sources are d_sources_order[0 .. source_count) when source_count >= 0 (it must be a
  /// permutation of the tasks without children; null only with a count of 0), else the leaves in
  /// ascending id order (then d_sources_order must be null). The arrays are copied: the caller may
  /// free them once this returns.
  static device_task_graph from_parents(const task_id* d_parent, std::int32_t n, cudaStream_t stream = nullptr,
                                        const task_id* d_sources_order = nullptr, std::int32_t source_count = -1,
                                        const device_graph_options& options = {});

  /// A forest in the octree's layout: task p's children are d_first_child[p] .. + d_child_count[p]
  /// (a leaf has count 0; its first_child is not read). Each task may be in one range at most.
  /// The sources as for from_parents (for the octree: its `leaves`, in Morton order).
  static device_task_graph from_children(const std::int32_t* d_first_child, const std::int32_t* d_child_count, std::int32_t n,
                                         cudaStream_t stream = nullptr, const task_id* d_sources_order = nullptr,
                                         std::int32_t source_count = -1, const device_graph_options& options = {});

  /// A forest the caller vouches for, because it built the arrays itself (the GPU octree builder's
  /// tree: trees::make_device_upward_graph of a built_device_octree): d_parent (no_task for a
  /// root) and d_dependency_count (children per task) of n tasks, the sources (every task without
  /// children, once each, in the order they are to be run) and the number of roots. Nothing is
  /// checked on the device and the host does not wait: the three arrays are copied on `stream`,
  /// so the graph is ready in that stream's order (another stream must wait for it, e.g. with an
  /// event). What a wrong forest does is what cycle_check::never says. Host-side arguments are
  /// still checked (counts, null arrays) with status::invalid_argument.
  static device_task_graph from_trusted_forest(const task_id* d_parent, const std::int32_t* d_dependency_count, std::int32_t n,
                                               const task_id* d_sources, std::int32_t source_count, std::int32_t sink_count,
                                               cudaStream_t stream = nullptr);

  /// from_trusted_forest into this graph, keeping its device arrays where they are large enough:
  /// a tree rebuilt every step then allocates nothing after the first (a cudaMalloc of a few MB
  /// costs about as much as the copies). Arrays that must grow grow by half again, and growing
  /// waits for the device (cudaFree does): a tree that grows a little each step pays it rarely. No
  /// work may still use the graph when this is called.
  void assign_trusted_forest(const task_id* d_parent, const std::int32_t* d_dependency_count, std::int32_t n,
                             const task_id* d_sources, std::int32_t source_count, std::int32_t sink_count,
                             cudaStream_t stream = nullptr);

  /// A DAG the caller built on the device and vouches for (the FMM's task DAG, made by kernels
  /// from device interaction lists: trees/fmm's device_lists.hpp): the successors of task t are
  /// d_succ[d_succ_offsets[t] .. d_succ_offsets[t + 1]) (n + 1 offsets from 0 to edge_count),
  /// d_dependency_count[t] its predecessors, the sources every task without predecessors (once
  /// each, in the order they are to be run) and sink_count the tasks without successors. As
  /// from_trusted_forest: the arrays are copied on `stream` (ready_event()), nothing is checked on
  /// the device and the host does not wait; host arguments are checked (status::invalid_argument).
  /// A graph that is not what the counts say (a cycle, a wrong count) never becomes ready where it
  /// is wrong: a run then ends in status::timeout at its deadline, or, where no sink waits for the
  /// stuck tasks, ok without running them.
  static device_task_graph from_trusted_dag(const std::int32_t* d_succ_offsets, const task_id* d_succ, std::int32_t n,
                                            std::int32_t edge_count, const std::int32_t* d_dependency_count,
                                            const task_id* d_sources, std::int32_t source_count, std::int32_t sink_count,
                                            cudaStream_t stream = nullptr);

  device_task_graph(const device_task_graph&) = delete;
  device_task_graph& operator=(const device_task_graph&) = delete;
  /// A moved-from graph is empty.
  device_task_graph(device_task_graph&& other) noexcept;
  device_task_graph& operator=(device_task_graph&& other) noexcept;
  ~device_task_graph();

  std::int32_t task_count() const noexcept { return task_count_; }
  std::int32_t source_count() const noexcept { return source_count_; }
  std::int32_t sink_count() const noexcept { return sink_count_; }
  /// A forest (parent()), or a DAG from from_trusted_dag (succ_offsets(), successors()).
  bool is_tree() const noexcept { return succ_offsets_.size() == 0; }
  /// Device arrays: parent and dependency_count have task_count() entries, sources source_count()
  /// (after assign_trusted_forest the buffers may be larger). A DAG has no parent array (null) but
  /// task_count() + 1 succ_offsets and edge_count() successors.
  const task_id* parent() const noexcept { return parent_.data(); }
  const std::int32_t* succ_offsets() const noexcept { return succ_offsets_.data(); }
  const task_id* successors() const noexcept { return succ_.data(); }
  std::int32_t edge_count() const noexcept { return edge_count_; }
  const std::int32_t* dependency_count() const noexcept { return dependency_count_.data(); }
  const task_id* sources() const noexcept { return sources_.data(); }

  /// Recorded on the build's stream after a trusted build's copies (assign_trusted_forest); null
  /// for a graph that is complete on return (from_parents, from_children).
  cudaEvent_t ready_event() const noexcept { return ready_; }
  /// Makes `stream` wait until the graph is complete (nothing to do for a checked graph).
  void wait_ready(cudaStream_t stream) const;

  /// The device view the workers read; `pending` is the caller's device working copy of
  /// dependency_count() (copy it device to device before the first run).
  task_graph_ref ref(std::int32_t* pending) const noexcept;

  /// The same graph on the host (copies parent and sources back, derives the rest): for diagnosis
  /// (e.g. task_graph::find_stuck_task after a timeout) and tests. Synchronous.
  task_graph download() const;

 private:
  struct build;  // the steps both factories share

  device_buffer<task_id> parent_;
  device_buffer<std::int32_t> succ_offsets_;  // a DAG only (from_trusted_dag); empty for a forest
  device_buffer<task_id> succ_;
  device_buffer<std::int32_t> dependency_count_;
  device_buffer<task_id> sources_;
  cudaEvent_t ready_ = nullptr;  // owned; see ready_event()
  std::int32_t task_count_ = 0;
  std::int32_t source_count_ = 0;
  std::int32_t sink_count_ = 0;
  std::int32_t edge_count_ = 0;
};

}  // namespace canopy

#include "canopy/detail/device_task_graph.inl"
