// SPDX-License-Identifier: Apache-2.0
// The FMM on one GPU, two ways over the same device arrays and the same task bodies
// (detail/gpu_tasks.cuh), float expansions of order 4, 5, 6 or 8:
//
//   * the whole evaluation as ONE task DAG (task_dag.hpp) run by canopy::gpu_scheduler in one
//     persistent kernel: enqueue_dag is one run_async;
//   * the baseline a careful user would write: the same bodies as plain kernels, phase by phase
//     and level by level (P2M; M2M per level, deepest first; M2L; L2L per level, root first; P2P;
//     L2P), captured once into a CUDA graph: enqueue_level_graph is one cudaGraphLaunch. With
//     `near_field_branch` the P2P kernel runs on a branch of the graph beside the far field (as a
//     user who knows it has no dependency would place it), joined before L2P.
//
// Host-only header (g++ or nvcc); the kernels are compiled in trees/fmm/src/gpu_evaluate_p*.cu.
//
//   canopy::fmm::gpu_evaluator fmm(8, tree, geometry, lists, eps2);
//   fmm.enqueue_dag(stream);                          // or fmm.enqueue_level_graph(stream)
//   cudaStreamSynchronize(stream);
//   if (!fmm.last_dag_result().ok()) ...;
//   std::vector<canopy::fmm::field<float>> f = fmm.fields();   // tree.points' order
//
//   canopy::fmm::gpu_evaluator fmm(8, built, theta, eps2);     // from the GPU-built octree: no host tree
#pragma once

#include <cuda_runtime.h>

#include <canopy/fmm/expansion.hpp>
#include <canopy/fmm/interaction_lists.hpp>
#include <canopy/fmm/task_dag.hpp>
#include <canopy/passes/device_octree_builder.cuh>
#include <canopy/scheduler_options.hpp>
#include <canopy/status.hpp>
#include <canopy/trees/octree.hpp>

#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace canopy::fmm {

// The orders compiled for the GPU (each one is a persistent kernel per scheduler mode, so each
// costs compile time). 5 sits between the candidates of the accuracy target (issue 40): 4 is
// cheaper and 6 more accurate than it needs.
inline constexpr int gpu_orders[] = {4, 5, 6, 8};
inline bool gpu_order_supported(int order) { return order == 4 || order == 5 || order == 6 || order == 8; }

/// The scheduler options the evaluator runs its DAG with unless told otherwise: mode warp_rounds,
/// where every warp fetches, runs and resolves its tasks on its own (no block barrier between the
/// FMM's tasks of very different lengths; docs/FMM.md). dealt_sources stays -1, which the
/// evaluator reads as its leaf count: the up tasks are dealt out at the start, and the p2p tasks
/// are claimed, the longest class first, by warps that find no queued task (task_dag.hpp). Any count >= 0 is
/// taken as given (2^31 - 1: every source dealt, as for any other graph).
inline canopy::scheduler_options default_scheduler_options() {
  canopy::scheduler_options o;
  o.mode = canopy::mode::warp_rounds;
  return o;
}

/// gpu_evaluator::set_urgent_height's default: no task urgent (the queues first in, first out).
/// Every height tried (0 to 3) ran as fast or slower at 16k, 64k and 1M points: the last m2l tasks
/// to run are the leaves', behind the other leaves' in the backlog, whatever their order
/// (docs/FMM.md).
inline constexpr int default_urgent_height = -1;

/// gpu_evaluator::set_staged_kinds' masks (bits of all_staged_kinds, task_dag.hpp). The DAG's
/// default: up and down. Its m2l bodies stream: staged, they ran 20% slower in the DAG (where they
/// share the SMs with p2p bodies) though 1.5x faster in the level graph's M2L phase (H200, 1M
/// Plummer points, order 5; bench/RESULTS.md).
inline constexpr unsigned default_dag_staged_kinds = 1u << static_cast<int>(task_kind::up) | 1u << static_cast<int>(task_kind::down);
/// The level graphs' default: every kind that stages.
inline constexpr unsigned default_level_graph_staged_kinds = all_staged_kinds;

/// What a gpu_evaluator built from the device tree can run. `level_graph` builds the task DAG's
/// maps without its edges (dag_parts::maps_only) and no scheduler: at 16M Plummer points that is
/// 637M edges fewer. Then enqueue_dag and dag() throw std::logic_error, runs_dag() is false,
/// last_dag_result() is a default (ok) result since no DAG ran, and dag_blocks() is 0; the DAG's
/// diagnostics (set_task_clocks, set_task_timeline, set_urgent_height) are accepted and have no
/// effect. The N-body example's default schedule (the level graph) builds its evaluators so.
enum class schedules {
  dag_and_level_graph,
  level_graph,
};

/// Per task kind (task_kind's order: up, m2l, down, l2p, p2p), the SM clock cycles the bodies took,
/// how many ran and the longest body (clock64 of the body's first lane around the body, after the
/// group converged).
struct task_clocks {
  unsigned long long cycles[5] = {};
  unsigned long long tasks[5] = {};
  unsigned long long longest[5] = {};
};

/// Where the level-by-level baseline's time goes: each phase run alone (its kernels launched one
/// after another on the stream, not from the graph), in the order P2M, M2M, M2L, L2L, P2P, L2P.
struct level_phase_times {
  double ms[6] = {};    // stream time of the phase
  double busy[6] = {};  // the bodies' cycles over the phase's resident warp slots (time x clock x
                        // the warps its kernel keeps resident): 1 - busy is the GPU's idle share
  int m2m_levels = 0, l2l_levels = 0;  // kernels (levels) in the M2M and L2L phases
  task_clocks clocks;                  // the bodies' cycles by kind, over all phases
};

namespace detail {
// What every order's implementation provides (gpu_evaluate_impl.cuh).
class gpu_evaluator_base {
 public:
  virtual ~gpu_evaluator_base() = default;
  virtual void enqueue_dag(cudaStream_t stream) = 0;
  virtual void enqueue_level_graph(cudaStream_t stream, bool near_field_branch) = 0;
  virtual level_phase_times time_level_phases(cudaStream_t stream) = 0;
  virtual void set_task_clocks(bool on) = 0;
  virtual task_clocks read_task_clocks() = 0;
  virtual void set_task_timeline(bool on) = 0;
  virtual std::vector<unsigned long long> read_task_timeline() = 0;
  virtual void set_urgent_height(int min_height) = 0;
  virtual int urgent_height() const = 0;
  virtual void set_staged_kinds(unsigned dag, unsigned level_graph) = 0;
  virtual unsigned dag_staged_kinds() const = 0;
  virtual unsigned level_graph_staged_kinds() const = 0;
  virtual canopy::run_result last_dag_result() const = 0;
  virtual std::vector<field<float>> fields() const = 0;
  virtual const field<float>* device_fields() const = 0;
  virtual void poison(cudaStream_t stream) = 0;
  virtual int dag_blocks() const = 0;
  virtual int level_graph_kernels(bool near_field_branch) const = 0;
  virtual const task_dag& dag() const = 0;
  virtual task_ranges ranges() const = 0;
  virtual bool runs_dag() const = 0;
};
template <int P>
std::unique_ptr<gpu_evaluator_base> make_gpu_evaluator(const trees::octree& tree, std::span<const cell_geometry> geometry,
                                                       const interaction_lists& lists, double eps2,
                                                       const canopy::scheduler_options& options, const dag_shape& shape);
template <int P>
std::unique_ptr<gpu_evaluator_base> make_gpu_evaluator(const trees::built_device_octree& tree, double theta, double eps2,
                                                       const canopy::scheduler_options& options, cudaStream_t stream,
                                                       const dag_shape& shape, schedules runs, cudaMemPool_t scratch);
}  // namespace detail

class gpu_evaluator {
 public:
  /// Uploads the tree's points, the frames of `geometry`, the lists and the task DAG built from
  /// them and sizes the scheduler (options: its mode, grid, deadline; default_scheduler_options()
  /// is the fastest measured for the FMM). The level graphs are captured on their first use. Throws std::invalid_argument for an
  /// order outside gpu_orders or lists not of this tree, canopy::error without a usable device.
  /// `shape`: what the DAG's m2l tasks wait for (task_dag.hpp); the level graph does not use it.
  gpu_evaluator(int order, const trees::octree& tree, std::span<const cell_geometry> geometry, const interaction_lists& lists,
                double eps2, const canopy::scheduler_options& options = default_scheduler_options(), const dag_shape& shape = {});
  /// From the GPU-built octree, with no host copy of the tree: the cells' geometry, the
  /// interaction lists (opening parameter `theta`, as build_interaction_lists) and the task DAG are
  /// built on the device (device_lists.hpp), then used as the constructor above uses its
  /// arguments. Equal to it, field for field, given the same tree and theta (the lists come
  /// sorted: sort_sources). The tree's arrays are copied, so `tree` may be rebuilt or freed once
  /// this returns; work on `stream` that builds `tree` is waited for. Throws as the constructor
  /// above and as build_interaction_lists (theta outside (0, 1]). `runs`: schedules::level_graph
  /// builds no DAG edges and no scheduler (less set-up time and memory; enqueue_dag refuses).
  /// `scratch`: the pool the set-up's temporaries come from (device_lists.hpp: a pool that keeps
  /// its memory makes the next evaluator's set-up cheaper), or null for cudaMalloc.
  gpu_evaluator(int order, const trees::built_device_octree& tree, double theta, double eps2,
                const canopy::scheduler_options& options = default_scheduler_options(), cudaStream_t stream = nullptr,
                const dag_shape& shape = {}, schedules runs = schedules::dag_and_level_graph, cudaMemPool_t scratch = nullptr);
  gpu_evaluator(gpu_evaluator&&) noexcept = default;
  gpu_evaluator& operator=(gpu_evaluator&&) noexcept = default;
  ~gpu_evaluator() = default;

  int order() const { return order_; }
  /// One run of the whole DAG on `stream` (gpu_scheduler::run_async): returns at once. Throws
  /// std::logic_error for an evaluator built with schedules::level_graph.
  void enqueue_dag(cudaStream_t stream = nullptr) { impl_->enqueue_dag(stream); }
  /// One launch of the phase-by-phase CUDA graph on `stream`: returns at once.
  void enqueue_level_graph(cudaStream_t stream = nullptr, bool near_field_branch = false) {
    impl_->enqueue_level_graph(stream, near_field_branch);
  }
  /// Runs the level-by-level phases once, each timed alone, with its bodies' clock cycles and the
  /// GPU's busy share (synchronous; a diagnostic: the fields it leaves are the level graph's).
  level_phase_times time_level_phases(cudaStream_t stream = nullptr) { return impl_->time_level_phases(stream); }
  /// Counts each body's clock cycles, by kind, in the DAG runs that follow until
  /// set_task_clocks(false); resets the counts. A diagnostic: the counting adds two atomics and a
  /// group sync to every task.
  void set_task_clocks(bool on) { impl_->set_task_clocks(on); }
  /// The counts since set_task_clocks(true) (synchronous).
  task_clocks read_task_clocks() { return impl_->read_task_clocks(); }
  /// Records, in the DAG runs that follow until set_task_timeline(false), when each task's body
  /// began and ended (the device's global timer, ns; its first lane). A diagnostic: what a task
  /// waited for between its last predecessor's end and its start (the bench's "timeline").
  void set_task_timeline(bool on) { impl_->set_task_timeline(on); }
  /// The last recorded run's times: [2 t] the start and [2 t + 1] the end of task t's body
  /// (synchronous; empty before set_task_timeline(true)).
  std::vector<unsigned long long> read_task_timeline() { return impl_->read_task_timeline(); }
  /// Which of the DAG's tasks the scheduler runs before the other ready ones (dag_ops::urgent,
  /// the runtime's Ops::urgent hook, honoured by mode warp_rounds): every up task, and the m2l and
  /// down tasks of the nodes at least `min_height` levels above their deepest leaf, whose chains
  /// down to the leaves are the run's longest. A negative value: none (first in, first out).
  /// Default default_urgent_height (none). Synchronous; results do not depend on it.
  void set_urgent_height(int min_height) { impl_->set_urgent_height(min_height); }
  int urgent_height() const { return impl_->urgent_height(); }
  /// Which task kinds' bodies stage the expansions they read in shared memory (all_staged_kinds'
  /// bits; the others read them straight from global memory): in the DAG, and in the level graphs
  /// (and time_level_phases). Orders up to 6 (order 8's bodies never stage). Defaults
  /// default_dag_staged_kinds and default_level_graph_staged_kinds, each the faster measured for
  /// its schedule. Results do not depend on it, bit for bit. Synchronous; the level graphs are
  /// captured again on their next use. Throws std::invalid_argument for a bit outside
  /// all_staged_kinds.
  void set_staged_kinds(unsigned dag, unsigned level_graph) { impl_->set_staged_kinds(dag, level_graph); }
  unsigned dag_staged_kinds() const { return impl_->dag_staged_kinds(); }
  unsigned level_graph_staged_kinds() const { return impl_->level_graph_staged_kinds(); }
  /// After synchronising the stream of the last enqueue_dag: its result (a timeout or error of
  /// the scheduler; the level graph's errors are the stream's, seen by the synchronisation).
  canopy::run_result last_dag_result() const { return impl_->last_dag_result(); }
  /// The field of every point of tree.points (Morton order); synchronous.
  std::vector<field<float>> fields() const { return impl_->fields(); }
  /// The same fields in device memory, where the runs write them, for work that reads them on the
  /// device with no host copy (the N-body example's kicks): valid while this evaluator lives,
  /// complete once the stream of the last enqueue reaches that point.
  const field<float>* device_fields() const { return impl_->device_fields(); }
  /// Fills the expansions and fields with NaN (stream-ordered), so that a result a run failed to
  /// write cannot pass for one (the tests and the benchmark do it before each checked run).
  void poison(cudaStream_t stream = nullptr) { impl_->poison(stream); }
  /// The persistent kernel's grid of the last DAG run (0 without a scheduler).
  int dag_blocks() const { return impl_->dag_blocks(); }
  /// Whether enqueue_dag can run (false when built with schedules::level_graph).
  bool runs_dag() const { return impl_->runs_dag(); }
  /// How many kernel nodes the level graph holds (P2M, M2M levels, M2L, L2L levels, P2P, L2P).
  int level_graph_kernels(bool near_field_branch = false) const { return impl_->level_graph_kernels(near_field_branch); }
  /// The DAG on the host: as built (host tree), or downloaded on the first call (device tree;
  /// synchronous). Throws std::logic_error without a DAG (schedules::level_graph).
  const task_dag& dag() const { return impl_->dag(); }
  /// The DAG's id ranges (task_count() = ranges().end), without a download.
  task_ranges ranges() const { return impl_->ranges(); }

 private:
  int order_;
  std::unique_ptr<detail::gpu_evaluator_base> impl_;
};

namespace detail {
// make(std::integral_constant<int, P>{}) for the order P given, among the orders compiled for the
// GPU (one translation unit each: src/gpu_evaluate_p{4,5,6,8}.cu).
template <class Make>
std::unique_ptr<gpu_evaluator_base> for_gpu_order(int order, Make&& make) {
  switch (order) {
    case 4: return make(std::integral_constant<int, 4>{});
    case 5: return make(std::integral_constant<int, 5>{});
    case 6: return make(std::integral_constant<int, 6>{});
    case 8: return make(std::integral_constant<int, 8>{});
    default: break;
  }
  throw std::invalid_argument("fmm::gpu_evaluator: order " + std::to_string(order) + " is not compiled for the GPU (4, 5, 6 or 8)");
}
}  // namespace detail

inline gpu_evaluator::gpu_evaluator(int order, const trees::octree& tree, std::span<const cell_geometry> geometry,
                                    const interaction_lists& lists, double eps2, const canopy::scheduler_options& options,
                                    const dag_shape& shape)
    : order_(order) {
  impl_ = detail::for_gpu_order(order, [&](auto p) {
    return detail::make_gpu_evaluator<decltype(p)::value>(tree, geometry, lists, eps2, options, shape);
  });
}

inline gpu_evaluator::gpu_evaluator(int order, const trees::built_device_octree& tree, double theta, double eps2,
                                    const canopy::scheduler_options& options, cudaStream_t stream, const dag_shape& shape,
                                    schedules runs, cudaMemPool_t scratch)
    : order_(order) {
  impl_ = detail::for_gpu_order(order, [&](auto p) {
    return detail::make_gpu_evaluator<decltype(p)::value>(tree, theta, eps2, options, stream, shape, runs, scratch);
  });
}

}  // namespace canopy::fmm
