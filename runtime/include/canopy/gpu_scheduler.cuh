// SPDX-License-Identifier: Apache-2.0
// The GPU backend: a move-only host object that owns the device copy of a task graph, the queues
// and the run state, and launches the persistent kernel for a user's operation.
//
//   canopy::gpu_scheduler sched(graph, options);     // uploads, allocates once
//   canopy::run_result r = sched.run(my_ops);          // one cooperative launch + sync
//
//   sched.run_async(my_ops, stream);                   // stream-ordered: enqueue, return at once
//   my_consumer<<<g, b, 0, stream>>>(...);             // starts when the run has finished
//   cudaStreamSynchronize(stream);
//   canopy::run_result r2 = sched.last_result();       // the last run's result
//
// `Ops` is any trivially copyable type with `__device__ void operator()(canopy::task_id) const`.
// It is called exactly once per task, after all of the task's dependencies have returned, and
// whatever those wrote before returning is visible to it.
//
// This header is the API; the definitions are in canopy/detail/gpu_scheduler.inl, included at its
// end (nvcc only: the persistent kernel is a template instantiated for the caller's Ops).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/error.hpp"
#include "canopy/detail/check_options.hpp"
#include "canopy/detail/gpu_scheduler_members.hpp"
#include "canopy/detail/graph_launch.cuh"
#include "canopy/detail/scheduler_state.hpp"
#include "canopy/device_task_graph.cuh"
#include "canopy/mode.hpp"
#include "canopy/push_policy.hpp"
#include "canopy/scheduler_options.hpp"
#include "canopy/status.hpp"
#include "canopy/task_graph.hpp"

namespace canopy {

class gpu_scheduler;

/// What run_async returns: waits for that run and gives its result. Small and copyable; valid
/// while its scheduler lives (and is not moved). Only the latest run of a scheduler can be waited
/// for: every run overwrites the one report (see gpu_scheduler::last_result).
class run_ticket {
 public:
  /// Synchronises the run's stream and returns the run's result (the stream's errors as
  /// status::device_error). Throws canopy::error(status::invalid_argument) for a run captured into
  /// a CUDA graph (synchronise the stream the graph was launched on, then read last_result()) or when a
  /// later run of the scheduler has been enqueued since.
  run_result wait() const;
  /// True once the run's stream has nothing left to do (cudaStreamQuery); never blocks.
  bool ready() const;

 private:
  friend class gpu_scheduler;
  run_ticket(const gpu_scheduler* s, cudaStream_t stream, std::uint64_t seq, bool captured)
      : sched_(s), stream_(stream), seq_(seq), captured_(captured) {}
  const gpu_scheduler* sched_;
  cudaStream_t stream_;
  std::uint64_t seq_;
  bool captured_;
};

/// What a run leaves for kernels enqueued after it on the same stream (gpu_scheduler::
/// device_status): the run's canopy::status as an int and the task it names (no_task if none).
/// Mapped host memory: readable from the device and, after a synchronisation, from the host.
struct device_run_status {
  std::int32_t code;
  task_id task;
};
static_assert(offsetof(detail::run_report, code) == offsetof(device_run_status, code) &&
              offsetof(detail::run_report, task) == offsetof(device_run_status, task));

/// What a scheduler's queues and run counters hold between runs (gpu_scheduler::queue_state): a
/// diagnostic. After a successful run every queue is empty and nothing is pending; a failed run
/// leaves what it had queued, with reset_pending set, and the next run resets it all on the device
/// before any task starts (run_lifecycle.cuh).
struct queue_state {
  std::int64_t global_items = 0;  ///< tasks in the global queue (the lock-free ring, or the locked modes' ring)
  std::int64_t shared_items = 0;  ///< tasks in every block's shared queue, together
  bool list_empty = true;         ///< mutex mode: the linked-list queue holds no node
  bool reset_pending = false;     ///< the last run failed: the next one resets queues and counters first
  bool empty() const { return global_items == 0 && shared_items == 0 && list_empty; }
};

/// The GPU backend (see the top of this file). Move-only; one host thread at a time may be inside
/// run() or run_async().
class gpu_scheduler {
 public:
  /// Uploads `graph` (a tree's parent array or a DAG's successor lists, the counts and the
  /// sources) and allocates the queues, once for every run. Throws canopy::error: invalid_argument
  /// for options outside their ranges or a private queue that does not fit in shared memory,
  /// device_error when there is no CUDA device or it cannot launch cooperatively; cuda_error when
  /// a CUDA call fails.
  gpu_scheduler(const task_graph& graph, const scheduler_options& options);
  /// A tree (or a trusted DAG) whose graph was built on the device (device_task_graph): its arrays are copied device
  /// to device on `stream`, with no host copy of the tree. Throws canopy::error for a graph with
  /// tasks but no root (only a cycle has none).
  gpu_scheduler(const device_task_graph& graph, const scheduler_options& options, cudaStream_t stream = nullptr);
  gpu_scheduler(const gpu_scheduler&) = delete;
  gpu_scheduler& operator=(const gpu_scheduler&) = delete;
  gpu_scheduler(gpu_scheduler&&) noexcept = default;
  gpu_scheduler& operator=(gpu_scheduler&&) noexcept = default;

  /// One run: run_async, then a stream synchronisation and last_result(). A run that cannot be
  /// enqueued returns its error as the result (never throws for it); so does a call while another
  /// host thread is inside run() or run_async() of this scheduler (invalid_argument).
  template <class Ops>
  run_result run(const Ops& ops, cudaStream_t stream = nullptr);

  /// Enqueues one run on `stream` and returns at once: a cooperative launch of the persistent
  /// kernel (through a cached CUDA graph unless options().graph_launch is false or the stream is
  /// capturing), with no host synchronisation and no host write: the kernel resets its own state
  /// (run_lifecycle.cuh). Kernels enqueued after it on the stream see its results. Capturable:
  /// inside cudaStreamBeginCapture it becomes one cooperative kernel node, correct on every
  /// replay. Runs of one scheduler must not overlap: enqueue them on one stream (or order the
  /// streams with events). Throws canopy::error before enqueueing anything when the run cannot
  /// start (invalid_argument: the grid does not fit, or another host thread is inside run() or
  /// run_async() of this scheduler; device_error: a CUDA call failed).
  ///
  /// Beside other kernels: the launch is cooperative, so the run's blocks start only when all of
  /// them can be resident. A run whose grid needs SMs that another kernel holds (the default
  /// grid, blocks = 0, needs all of them) waits on the device, running no task, until that kernel
  /// leaves them; the deadline counts from the blocks' start, so the wait is not part of it. To
  /// run beside a long kernel, size `blocks` to the SMs it leaves free: such a run starts at once.
  /// (tests/gpu/stress/scheduler_limits_gpu_test.cu, BesideASpinner, tests both on an H100.)
  template <class Ops>
  run_ticket run_async(const Ops& ops, cudaStream_t stream = nullptr);

  /// Runs the next runs on another tree built on the device (a simulation's tree of this step),
  /// keeping the scheduler's memory: the graph's arrays are copied on `stream` and the next run
  /// resets the queues and counters itself, so nothing waits for the host unless the new graph
  /// needs larger buffers (graph buffers grow to 1.5 times the need; larger queues are new buffers
  /// reset by the host: that synchronises). Enqueue the runs that use it on `stream` too; no run
  /// may be in flight on another stream. The `graph` may be destroyed once this returns.
  void set_graph(const device_task_graph& graph, cudaStream_t stream = nullptr);

  /// The result of the last run that completed: call after synchronising the stream the run (or
  /// the graph that holds it) was enqueued on. For a timeout it names the stuck task, judged
  /// from the dependency counters the run left (they stay until the next run starts).
  run_result last_result() const;
  /// The queues and run counters as the last completed run left them (synchronises the device:
  /// call it between runs, never while one is in flight).
  canopy::queue_state queue_state() const;
  /// The last completed run's status, for kernels enqueued after it (mapped host memory).
  const device_run_status* device_status() const { return reinterpret_cast<const device_run_status*>(report_.device()); }

  /// How many blocks of this mode's kernel can be co-resident for `Ops` (the default grid).
  template <class Ops>
  int max_blocks(canopy::mode m) const;

  /// The options the next run uses (the constructor's, as changed by the setters below).
  const scheduler_options& options() const { return options_; }
  /// The mode and the push policy of the next runs. Throw canopy::error(status::invalid_argument)
  /// for a value outside the tables.
  void set_mode(canopy::mode m);
  void set_push_policy(push_policy p);
  /// Whether the next runs launch through cached CUDA graphs (scheduler_options::graph_launch).
  void set_graph_launch(bool on) { options_.graph_launch = on; }
  /// Launch graphs cached so far, and updates of their parameters (see detail::graph_launcher).
  std::size_t cached_launches() const { return launcher_.size(); }
  std::size_t launch_updates() const { return launcher_.updates(); }
  /// The device's multiprocessors.
  int sm_count() const { return sm_count_; }
  /// The grid of the last launch.
  int last_grid() const { return last_grid_; }
  /// Asks the run in progress to stop with status::aborted (any host thread). A request made while
  /// no run is in progress is dropped: run() and run_async() clear the flag before they launch, as
  /// the CPU backend does (one rule for both, tested by SchedulerContract.AbortBeforeARunIsDropped).
  void request_abort();

 private:
  friend class run_ticket;
  void request_abort_clear();  // drops an abort requested while no run was in progress
  template <class Ops>
  run_ticket enqueue(const Ops& ops, cudaStream_t stream);  // run_async without the call guard
  detail::scheduler_ref make_ref(int grid, int batch_max) const;  // batch_max: tasks a block fetches at most
  void reset_state();  // queues, counters, pending and the report: at construction
  void init_device(const scheduler_options& options);  // the device's properties, checks
  void allocate_queues(std::size_t workers);
  void check_device_graph(const device_task_graph& graph) const;
  void copy_device_graph(const device_task_graph& graph, cudaStream_t stream);  // grows the graph buffers
  const task_graph& host_graph() const;  // the failure diagnosis's view (downloaded for a device graph)

  std::int32_t task_count_ = 0, source_count_ = 0, sink_count_ = 0;
  // The host's graph: given (task_graph constructor), or downloaded from the device when a
  // timeout must be explained (device_task_graph constructor, set_graph).
  mutable std::optional<task_graph> host_graph_;
  scheduler_options options_;
  int device_ = 0, sm_count_ = 0, max_workers_ = 0;
  detail::queue_capacities capacity_;
  // The graph on the device: parent (trees) or successor lists (DAGs), counts and sources.
  device_buffer<task_id> parent_;  // the graph buffers may be longer than the graph (set_graph)
  device_buffer<std::int32_t> succ_offsets_;
  device_buffer<task_id> succ_;
  device_buffer<std::int32_t> dependency_count_;
  device_buffer<std::int32_t> pending_;
  device_buffer<task_id> sources_;
  // The queues: global (lock-free ring, and the locked modes' ring), one shared queue per worker.
  device_buffer<detail::ring_header> global_header_;
  device_buffer<std::uint64_t> global_slots_;
  device_buffer<task_id> locked_slots_;
  device_buffer<detail::ring_header> shared_headers_;
  device_buffer<std::uint64_t> shared_slots_;
  device_buffer<detail::run_counters> counters_;  // reset by the runs themselves (run_lifecycle.cuh)
  detail::mapped_report report_;
  int last_grid_ = -1;
  std::uint32_t static_sources_ = 0;  // of the last run: the failure report counts claimed sources
  std::uint64_t enqueued_ = 0;        // runs enqueued so far: a ticket's sequence number
  mutable std::vector<std::pair<const void*, int>> occupancy_cache_;
  detail::graph_launcher launcher_;
  std::unique_ptr<detail::gpu_call_guard> guard_ = std::make_unique<detail::gpu_call_guard>();
};

}  // namespace canopy

#include "canopy/detail/gpu_scheduler.inl"
