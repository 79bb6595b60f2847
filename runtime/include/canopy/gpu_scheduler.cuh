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
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "canopy/cuda/device.hpp"
#include "canopy/cuda/device_buffer.hpp"
#include "canopy/detail/check_options.hpp"
#include "canopy/detail/graph_launch.cuh"
#include "canopy/detail/persistent_kernel.cuh"
#include "canopy/device_task_graph.cuh"
#include "canopy/scheduler_options.hpp"
#include "canopy/status.hpp"
#include "canopy/task_graph.hpp"

namespace canopy {

namespace detail {

template <class Ops>
const void* kernel_for(mode m) {
  return with_mode(m, [](auto M) { return reinterpret_cast<const void*>(&persistent_kernel<Ops, decltype(M)::value>); });
}

/// The automatic cap of an idle block's sleep between polls: 4 ns per block of the grid, at least
/// 2 us, at most 64 us, so that the idle blocks of any grid together look at the shared lines (the
/// global queue's count, the stop flag) about once every 4 ns at most: a full grid polling every
/// 2 us makes each dependent hop of a deep DAG wait behind its own grid's polling. A block reaches
/// the cap only after being idle about twice as long, so short gaps are unaffected; and in the
/// first part of a run the cap is lower still (idle_sleep_cap in block_loop.cuh), so that a short
/// run's end is not held up.
constexpr std::uint32_t auto_idle_sleep_ns(int grid) {
  const std::int64_t ns = 4 * static_cast<std::int64_t>(grid);
  return static_cast<std::uint32_t>(ns < 2048 ? 2048 : ns > 65536 ? 65536 : ns);
}

/// The automatic cap for a block that has been idle for long (idle_sleep_cap in block_loop.cuh):
/// 64 us. At full occupancy (1,320 blocks) the grid-sized cap above still cost each hop of a deep
/// DAG about 1 us (3.00 us per task against 2.01 with 132 blocks); with 64 us it cost 2.04 (bench/
/// RESULTS.md, fifteenth session).
inline constexpr std::uint32_t auto_idle_sleep_long_ns = 65536;

/// Lets `kernel` be launched with `bytes` of dynamic shared memory. The limit is a property of the
/// kernel, not of a scheduler, so it is only ever raised: a second scheduler with a smaller private
/// queue used to lower it under the first, whose next launch then failed.
inline void allow_dynamic_shared_bytes(const void* kernel, std::size_t bytes) {
  if (bytes <= 48 * 1024) return;
  cudaFuncAttributes attr{};
  cuda_check(cudaFuncGetAttributes(&attr, kernel), "cudaFuncGetAttributes");
  if (static_cast<std::size_t>(attr.maxDynamicSharedSizeBytes) < bytes)
    cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
               "cudaFuncSetAttribute");
}

/// The deadline in ns for the kernel's clock (global timer + budget), saturated at 2^62 ns (146
/// years): milliseconds::max(), the natural "no deadline", overflowed the product and the sum.
inline std::uint64_t deadline_budget_ns(std::chrono::milliseconds deadline) {
  constexpr std::uint64_t cap_ns = std::uint64_t{1} << 62;
  const auto ms = static_cast<std::uint64_t>(deadline.count());  // > 0: checked by the constructor
  return ms >= cap_ns / 1000000u ? cap_ns : ms * 1000000u;
}

/// The run report lives in mapped pinned host memory, so that the host reads a run's status
/// without a copy and can raise the abort flag while the kernel runs. Move-only; a moved-from
/// report holds neither pointer.
class mapped_report {
 public:
  mapped_report() = default;
  static mapped_report allocate() {
    mapped_report r;
    cuda_check(cudaHostAlloc(reinterpret_cast<void**>(&r.host_), sizeof(run_report), cudaHostAllocMapped), "cudaHostAlloc");
    *r.host_ = run_report{0, no_task, 0, 0};
    cuda_check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&r.device_), r.host_, 0), "cudaHostGetDevicePointer");
    return r;
  }
  mapped_report(const mapped_report&) = delete;
  mapped_report& operator=(const mapped_report&) = delete;
  mapped_report(mapped_report&& o) noexcept
      : host_(std::exchange(o.host_, nullptr)), device_(std::exchange(o.device_, nullptr)) {}
  mapped_report& operator=(mapped_report&& o) noexcept {
    if (this != &o) {
      release();
      host_ = std::exchange(o.host_, nullptr);
      device_ = std::exchange(o.device_, nullptr);
    }
    return *this;
  }
  ~mapped_report() { release(); }

  run_report* operator->() const noexcept { return host_; }
  run_report* host() const noexcept { return host_; }
  run_report* device() const noexcept { return device_; }

 private:
  void release() noexcept {
    if (host_ != nullptr) (void)cudaFreeHost(host_);
    host_ = device_ = nullptr;
  }
  run_report* host_ = nullptr;
  run_report* device_ = nullptr;
};

/// Held while one host thread is inside run() or run_async() of a scheduler: a second thread's
/// call is refused with invalid_argument instead of enqueueing a run over the same queues and
/// counters. On the heap so that the scheduler stays movable.
struct gpu_call_guard {
  std::atomic<bool> busy{false};
  class hold {
   public:
    explicit hold(gpu_call_guard& g, const char* call) : g_(g) {
      if (g_.busy.exchange(true, std::memory_order_acquire))
        throw error(status::invalid_argument, std::string("gpu backend: ") + call +
                                                  " while another thread is in run() or run_async() of this scheduler "
                                                  "(one caller at a time; use a scheduler per thread)");
    }
    hold(const hold&) = delete;
    hold& operator=(const hold&) = delete;
    ~hold() { g_.busy.store(false, std::memory_order_release); }

   private:
    gpu_call_guard& g_;
  };
};

}  // namespace detail

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

class gpu_scheduler {
 public:
  gpu_scheduler(const task_graph& graph, const scheduler_options& options);
  /// A tree whose graph was built on the device (device_task_graph): its arrays are copied device
  /// to device on `stream`, with no host copy of the tree. Throws canopy::error for a graph with
  /// tasks but no root (only a cycle has none).
  gpu_scheduler(const device_task_graph& graph, const scheduler_options& options, cudaStream_t stream = nullptr);
  gpu_scheduler(const gpu_scheduler&) = delete;
  gpu_scheduler& operator=(const gpu_scheduler&) = delete;
  gpu_scheduler(gpu_scheduler&&) noexcept = default;
  gpu_scheduler& operator=(gpu_scheduler&&) noexcept = default;

  /// One run: run_async, then a stream synchronisation and status(). A run that cannot be
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

  const scheduler_options& options() const { return options_; }
  /// Throw canopy::error(status::invalid_argument) for a value outside the tables.
  void set_mode(canopy::mode m) {
    if (!is_valid(m)) throw error(status::invalid_argument, "gpu backend: unknown mode " + std::to_string(static_cast<int>(m)));
    options_.mode = m;
  }
  void set_push_policy(push_policy p) {
    if (!is_valid(p))
      throw error(status::invalid_argument, "gpu backend: unknown push policy " + std::to_string(static_cast<int>(p)));
    options_.policy = p;
  }
  void set_graph_launch(bool on) { options_.graph_launch = on; }
  /// Launch graphs cached so far, and updates of their parameters (see detail::graph_launcher).
  std::size_t cached_launches() const { return launcher_.size(); }
  std::size_t launch_updates() const { return launcher_.updates(); }
  int sm_count() const { return sm_count_; }
  /// The grid of the last launch.
  int last_grid() const { return last_grid_; }
  /// Asks the run in progress to stop with status::aborted (any host thread). A request made while
  /// no run is in progress is dropped: run() and run_async() clear the flag before they launch, as
  /// the CPU backend does (one rule for both, tested by SchedulerContract.AbortBeforeARunIsDropped).
  void request_abort() {
    if (report_.host() == nullptr) return;  // a moved-from scheduler runs nothing
    cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(report_->abort_requested).store(1, cuda::std::memory_order_relaxed);
  }

 private:
  friend class run_ticket;
  void request_abort_clear() {
    cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(report_->abort_requested).store(0, cuda::std::memory_order_relaxed);
  }
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

// ---------------------------------------------------------------------------------------------

inline void gpu_scheduler::init_device(const scheduler_options& options) {
  detail::check_options(options, "gpu backend", true);
  if (!gpu_available()) throw error(status::device_error, "gpu backend: no CUDA device is available");
  cuda_check(cudaGetDevice(&device_), "cudaGetDevice");
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
  if (!prop.cooperativeLaunch) throw error(status::device_error, "gpu backend: the device does not support cooperative launches");
  sm_count_ = prop.multiProcessorCount;
  max_workers_ = sm_count_ * (prop.maxThreadsPerMultiProcessor / options.threads_per_block);
  capacity_ = detail::resolve_capacities(options, task_count_);
  const std::size_t smem = detail::kernel_shared_bytes(options.threads_per_block, capacity_.priv);
  if (smem > prop.sharedMemPerBlockOptin)
    throw error(status::invalid_argument, "gpu backend: private queue capacity " + std::to_string(capacity_.priv) +
                                              " does not fit in shared memory");
}

inline void gpu_scheduler::allocate_queues(std::size_t workers) {
  global_header_ = device_buffer<detail::ring_header>(1);
  global_slots_ = device_buffer<std::uint64_t>(static_cast<std::size_t>(capacity_.global));
  locked_slots_ = device_buffer<task_id>(static_cast<std::size_t>(capacity_.global));
  shared_headers_ = device_buffer<detail::ring_header>(workers);
  shared_slots_ = device_buffer<std::uint64_t>(workers * static_cast<std::size_t>(capacity_.shared));
  counters_ = device_buffer<detail::run_counters>(1);
}

inline gpu_scheduler::gpu_scheduler(const task_graph& graph, const scheduler_options& options)
    : task_count_(graph.task_count()),
      source_count_(static_cast<std::int32_t>(graph.sources().size())),
      sink_count_(graph.sink_count()),
      host_graph_(graph),
      options_(options) {
  init_device(options);
  if (graph.is_tree()) {
    parent_ = device_buffer<task_id>(graph.parent());
  } else {
    succ_offsets_ = device_buffer<std::int32_t>(graph.succ_offsets());
    succ_ = device_buffer<task_id>(graph.successors());
  }
  dependency_count_ = device_buffer<std::int32_t>(graph.dependency_count());
  pending_ = device_buffer<std::int32_t>(graph.dependency_count());
  sources_ = device_buffer<task_id>(graph.sources());
  allocate_queues(static_cast<std::size_t>(max_workers_));
  report_ = detail::mapped_report::allocate();
  reset_state();
}

inline void gpu_scheduler::check_device_graph(const device_task_graph& graph) const {
  if (graph.task_count() > 0 && graph.sink_count() == 0)
    throw error(status::invalid_argument, "gpu backend: a device task graph of " + std::to_string(graph.task_count()) +
                                              " tasks has no root (every task has a parent: a cycle)");
}

inline void gpu_scheduler::copy_device_graph(const device_task_graph& graph, cudaStream_t stream) {
  graph.wait_ready(stream);  // a trusted build may still be copying on its own stream
  const auto n = static_cast<std::size_t>(graph.task_count());
  const auto sources = static_cast<std::size_t>(graph.source_count());
  const auto grow = [](auto& buffer, std::size_t need) {
    using T = std::remove_pointer_t<decltype(buffer.data())>;
    if (buffer.size() < std::max<std::size_t>(need, 1)) {
      buffer = device_buffer<T>();  // free first
      buffer = device_buffer<T>(std::max<std::size_t>(need + need / 2, 1));
    }
  };
  // A device task graph is a tree: successor lists left from a DAG the scheduler was made with would
  // make the kernel read the new tree as that DAG.
  succ_offsets_ = device_buffer<std::int32_t>();
  succ_ = device_buffer<task_id>();
  grow(parent_, n);
  grow(dependency_count_, n);
  grow(pending_, n);
  grow(sources_, sources);
  if (n != 0) {
    cuda_check(cudaMemcpyAsync(parent_.data(), graph.parent(), n * sizeof(task_id), cudaMemcpyDeviceToDevice, stream), "copy graph");
    cuda_check(cudaMemcpyAsync(dependency_count_.data(), graph.dependency_count(), n * sizeof(std::int32_t),
                               cudaMemcpyDeviceToDevice, stream),
               "copy graph");
    cuda_check(cudaMemcpyAsync(pending_.data(), graph.dependency_count(), n * sizeof(std::int32_t), cudaMemcpyDeviceToDevice, stream),
               "copy graph");
  }
  if (sources != 0)
    cuda_check(cudaMemcpyAsync(sources_.data(), graph.sources(), sources * sizeof(task_id), cudaMemcpyDeviceToDevice, stream),
               "copy graph");
  task_count_ = graph.task_count();
  source_count_ = graph.source_count();
  sink_count_ = graph.sink_count();
  host_graph_.reset();
}

inline gpu_scheduler::gpu_scheduler(const device_task_graph& graph, const scheduler_options& options, cudaStream_t stream)
    : task_count_(graph.task_count()), options_(options) {
  check_device_graph(graph);
  init_device(options);
  copy_device_graph(graph, stream);
  allocate_queues(static_cast<std::size_t>(max_workers_));
  report_ = detail::mapped_report::allocate();
  cuda_check(cudaStreamSynchronize(stream), "copy graph");  // reset_state's copies are on the legacy stream
  reset_state();
}

namespace detail {
/// Marks the scheduler's state dirty in stream order: the next run resets the queues, dependency
/// counters and run counters itself, for the graph it is given (run_lifecycle.cuh's begin_run).
template <int = 0>
__global__ void mark_dirty_kernel(run_counters* c) {
  c->dirty = 1;
}
}  // namespace detail

inline void gpu_scheduler::set_graph(const device_task_graph& graph, cudaStream_t stream) {
  if (report_.host() == nullptr) throw error(status::invalid_argument, "gpu backend: set_graph on a moved-from scheduler");
  check_device_graph(graph);
  const detail::queue_capacities need = detail::resolve_capacities(options_, graph.task_count());
  copy_device_graph(graph, stream);
  if (need.global > capacity_.global || need.shared > capacity_.shared || need.priv != capacity_.priv) {
    // Larger queues: new buffers, reset by the host like a new scheduler's (this waits).
    cuda_check(cudaStreamSynchronize(stream), "set_graph");
    capacity_ = need;
    allocate_queues(static_cast<std::size_t>(max_workers_));
    occupancy_cache_.clear();  // the private queue's shared memory is part of the occupancy
    reset_state();
    return;
  }
  detail::mark_dirty_kernel<<<1, 1, 0, stream>>>(counters_.data());
  cuda_check(cudaGetLastError(), "set_graph");
}

inline const task_graph& gpu_scheduler::host_graph() const {
  if (!host_graph_) {
    const auto n = static_cast<std::size_t>(task_count_);
    std::vector<task_id> parent(n), sources(static_cast<std::size_t>(source_count_));
    if (n != 0) cuda_check(cudaMemcpy(parent.data(), parent_.data(), n * sizeof(task_id), cudaMemcpyDeviceToHost), "read graph");
    if (!sources.empty())
      cuda_check(cudaMemcpy(sources.data(), sources_.data(), sources.size() * sizeof(task_id), cudaMemcpyDeviceToHost), "read graph");
    host_graph_ = task_graph::from_parents(parent, sources);
  }
  return *host_graph_;
}

inline detail::scheduler_ref gpu_scheduler::make_ref(int grid, int batch_max) const {
  task_graph_ref gr{task_count_,  parent_.data(),  succ_offsets_.data(), succ_.data(), dependency_count_.data(),
                    pending_.data(), sources_.data(), source_count_,        sink_count_};
  // Spread the sources over the whole grid on the first pass (one chunk per block), but never
  // more than a block's batch holds: the block modes deal the first chunk of every block
  // statically (static_sources), and a first fetch takes exactly one chunk.
  const std::int64_t per_block = (static_cast<std::int64_t>(gr.source_count) + grid - 1) / grid;
  const int chunk = static_cast<int>(std::min<std::int64_t>(std::max<std::int64_t>(per_block, 1), batch_max));  // batch_max <= threads
  const auto static_sources = static_cast<std::uint32_t>(traits_of(options_.mode).block_fetch ? grid * chunk : 0);
  // A cap given by hand (<= 1 ms, checked by the constructor) is the cap however long a block has
  // been idle; the automatic one grows with the grid, and with a block's idle time.
  const auto given_sleep = static_cast<std::uint32_t>(options_.idle_sleep_max.count());
  const bool sleep_given = given_sleep > 0;
  return detail::scheduler_ref{gr,
                               global_header_.data(),
                               global_slots_.data(),
                               locked_slots_.data(),
                               shared_headers_.data(),
                               shared_slots_.data(),
                               capacity_.shared,
                               grid,
                               capacity_.priv,
                               chunk,
                               options_.policy,
                               counters_.data(),
                               max_workers_,
                               report_.device(),
                               detail::deadline_budget_ns(options_.deadline),
                               sleep_given ? given_sleep : detail::auto_idle_sleep_ns(grid),
                               sleep_given ? given_sleep : detail::auto_idle_sleep_long_ns,
                               static_sources,
                               batch_max};
}

inline void gpu_scheduler::reset_state() {
  // Synchronous copies on the legacy stream: they have landed when this returns, before any run
  // on any stream (also a non-blocking one) can read them. From here on the runs keep the state.
  const detail::run_counters c = detail::run_counters::initial(sink_count_);
  cuda_check(cudaMemcpy(counters_.data(), &c, sizeof c, cudaMemcpyHostToDevice), "reset counters");
  const detail::ring_header g = detail::ring_header::empty(capacity_.global);
  cuda_check(cudaMemcpy(global_header_.data(), &g, sizeof g, cudaMemcpyHostToDevice), "reset queue");
  cuda_check(cudaMemset(global_slots_.data(), 0, global_slots_.bytes()), "reset queue");
  const std::vector<detail::ring_header> s(static_cast<std::size_t>(max_workers_), detail::ring_header::empty(capacity_.shared));
  cuda_check(cudaMemcpy(shared_headers_.data(), s.data(), sizeof(detail::ring_header) * s.size(), cudaMemcpyHostToDevice), "reset queues");
  cuda_check(cudaMemset(shared_slots_.data(), 0, shared_slots_.bytes()), "reset queues");
  if (task_count_ != 0)
    cuda_check(cudaMemcpy(pending_.data(), dependency_count_.data(), static_cast<std::size_t>(task_count_) * sizeof(std::int32_t),
                          cudaMemcpyDeviceToDevice),
               "reset counters");
  *report_.host() = detail::run_report{0, no_task, 0, 0};
  cuda_check(cudaDeviceSynchronize(), "reset");  // the uploads are pageable copies, too
}

template <class Ops>
int gpu_scheduler::max_blocks(canopy::mode m) const {
  const void* kernel = detail::kernel_for<Ops>(m);
  // The occupancy query costs microseconds: answer repeated runs of the same kernel from a cache.
  for (const auto& [k, blocks] : occupancy_cache_)
    if (k == kernel) return blocks;
  const std::size_t smem = detail::kernel_shared_bytes(options_.threads_per_block, capacity_.priv);
  detail::allow_dynamic_shared_bytes(kernel, smem);
  int per_sm = 0;
  cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, options_.threads_per_block, smem),
                     "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  const int blocks = std::min(per_sm * sm_count_, max_workers_);
  occupancy_cache_.emplace_back(kernel, blocks);
  return blocks;
}

template <class Ops>
run_ticket gpu_scheduler::run_async(const Ops& ops, cudaStream_t stream) {
  if (!guard_) throw error(status::invalid_argument, "gpu backend: run on a moved-from scheduler");
  const detail::gpu_call_guard::hold hold(*guard_, "run_async()");
  return enqueue(ops, stream);
}

namespace detail {
/// Set by the process's first launch of a persistent kernel: from then on CUDA refuses to resize the
/// device heap (the mutex mode's queue nodes), so the mutex mode stops asking (one flag for the
/// process, not per device: a refused request is harmless, only reported).
inline std::atomic<bool> device_heap_fixed{false};
}  // namespace detail

template <class Ops>
run_ticket gpu_scheduler::enqueue(const Ops& ops, cudaStream_t stream) {
  static_assert(std::is_trivially_copyable_v<Ops>, "Ops is passed to the kernel by value: it must be trivially copyable");
  if (report_.host() == nullptr) throw error(status::invalid_argument, "gpu backend: run on a moved-from scheduler");
  // Before the ticket: a refused call must not look like a later run to an earlier run's ticket.
  if constexpr (detail::tree_only_of<Ops>)
    if (succ_offsets_.size() != 0)
      throw error(status::invalid_argument, std::string("gpu backend: ") + detail::tree_only_on_a_dag);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  const bool captured = capture == cudaStreamCaptureStatusActive;
  const run_ticket ticket(this, stream, ++enqueued_, captured);
  if (task_count_ == 0) return ticket;  // nothing to run: the report says ok
  const mode m = options_.mode;
  const int resident = max_blocks<Ops>(m);
  if (resident == 0)
    throw error(status::invalid_argument, "the " + std::string(to_string(m)) + " kernel cannot run " +
                                              std::to_string(options_.threads_per_block) +
                                              " threads per block on this device (too many registers or too much shared memory)");
  if (options_.blocks > resident)
    throw error(status::invalid_argument, "asked for " + std::to_string(options_.blocks) + " blocks, but at most " +
                                              std::to_string(resident) + " blocks of the " + std::string(to_string(m)) +
                                              " kernel can be co-resident on this device");
  const int grid = options_.blocks > 0 ? options_.blocks : resident;
  if (m == mode::mutex && !captured) {
    // The seed's first design allocates a list node per push from the device heap. CUDA lets the
    // heap grow only before the first kernel that calls malloc; after that we run with what there
    // is, and an exhausted heap is reported as QueueOverflow. (Not while capturing: the limit is
    // device-wide state, not a stream operation.)
    // Once any of Canopy's kernels has been launched the heap is fixed (the module holding them
    // uses malloc; measured on an H100, CUDA 13), and asking would only make CUDA report an error,
    // which compute-sanitizer lists: so it is asked only before the process's first launch.
    const std::size_t need = (static_cast<std::size_t>(task_count_) + 1024) * 64 + (8u << 20);
    std::size_t have = 0;
    cuda_check(cudaDeviceGetLimit(&have, cudaLimitMallocHeapSize), "cudaDeviceGetLimit");
    if (need > have && !detail::device_heap_fixed.load(std::memory_order_relaxed) &&
        cudaDeviceSetLimit(cudaLimitMallocHeapSize, need) != cudaSuccess)
      (void)cudaGetLastError();  // a kernel of the caller's used malloc first: run with the heap there is
  }
  last_grid_ = grid;
  // The limit is the kernel's, shared by every scheduler of the process: another scheduler may
  // have launched it since this one's occupancy query (it only ever raises the limit, but a
  // scheduler made before a CUDA context reset would not know), so it is checked before each launch.
  detail::allow_dynamic_shared_bytes(detail::kernel_for<Ops>(m), detail::kernel_shared_bytes(options_.threads_per_block, capacity_.priv));
  // An abort requested while no run was in progress is dropped (request_abort).
  if (!captured) request_abort_clear();
  const detail::scheduler_ref ref = make_ref(
      grid, detail::run_batch_max<Ops>(options_.threads_per_block, source_count_, grid));
  static_sources_ = ref.static_sources;
  const std::size_t smem = detail::kernel_shared_bytes(options_.threads_per_block, capacity_.priv);
  // A capturing stream takes the direct launch (one cooperative kernel node in the caller's
  // graph); a cached graph of our own cannot be launched into a capture.
  const cudaError_t e = launcher_.launch(detail::kernel_for<Ops>(m), grid, options_.threads_per_block, smem, ops, ref, stream,
                                         options_.graph_launch && !captured);
  if (e != cudaSuccess) {
    --enqueued_;
    throw error(status::device_error, std::string("persistent kernel: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  }
  detail::device_heap_fixed.store(true, std::memory_order_relaxed);
  return ticket;
}

template <class Ops>
run_result gpu_scheduler::run(const Ops& ops, cudaStream_t stream) {
  run_result result;
  std::optional<detail::gpu_call_guard::hold> hold;  // held until the run's result is read
  try {
    if (!guard_) throw error(status::invalid_argument, "gpu backend: run on a moved-from scheduler");
    hold.emplace(*guard_, "run()");
    enqueue(ops, stream);
  } catch (const error& e) {
    result.code = e.code();
    result.message = e.what();
    return result;
  }
  const cudaError_t e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    result.code = status::device_error;
    result.message = std::string("persistent kernel: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
    return result;
  }
  result = last_result();
  // A request that came after the run had finished must not stop the next one (run() is the
  // synchronous call: its caller asked to abort this run).
  if (result.code != status::aborted) request_abort_clear();
  return result;
}

inline run_result gpu_scheduler::last_result() const {
  run_result r;
  if (report_.host() == nullptr) return r;
  r.code = static_cast<canopy::status>(cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(report_->code).load(cuda::std::memory_order_relaxed));
  r.task = report_->task;
  if (r.ok()) return r;
  if (r.code == canopy::status::timeout) {
    const task_graph& g = host_graph();
    std::vector<std::int32_t> pending(static_cast<std::size_t>(task_count_));
    cuda_check(cudaMemcpy(pending.data(), pending_.data(), pending.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost),
               "read counters");
    detail::run_counters c = detail::run_counters::initial(0);
    cuda_check(cudaMemcpy(&c, counters_.data(), sizeof c, cudaMemcpyDeviceToHost), "read counters");
    r.task = g.find_stuck_task(pending);
    if (r.task == no_task) {  // e.g. continuation: the late task's chain finished after the deadline had stopped the run
      r.message = "deadline of " + std::to_string(options_.deadline.count()) +
                  " ms passed while a task was still running; every task had finished when the run stopped";
      return r;
    }
    r.message = "deadline of " + std::to_string(options_.deadline.count()) + " ms passed; task " + std::to_string(r.task) +
                " never became ready (" + std::to_string(c.sinks_left) + " of " + std::to_string(sink_count_) +
                " sinks unfinished, " +
                std::to_string(std::min<std::uint64_t>(std::uint64_t{c.source_cursor} + static_sources_, static_cast<std::uint64_t>(source_count_))) +
                " of " + std::to_string(source_count_) + " sources claimed)";
  } else if (r.code == canopy::status::queue_overflow) {
    r.message = options_.mode == mode::mutex
                    ? "device heap exhausted allocating a queue node for task " + std::to_string(r.task)
                    : "global queue full (capacity " + std::to_string(capacity_.global) + ") while pushing task " +
                          std::to_string(r.task);
  } else if (r.code == canopy::status::aborted) {
    r.message = "run aborted by the host";
  }
  return r;
}

inline queue_state gpu_scheduler::queue_state() const {
  canopy::queue_state q;
  if (report_.host() == nullptr) return q;
  cuda_check(cudaDeviceSynchronize(), "queue_state");
  detail::run_counters c = detail::run_counters::initial(0);
  cuda_check(cudaMemcpy(&c, counters_.data(), sizeof c, cudaMemcpyDeviceToHost), "read counters");
  detail::ring_header g{};
  cuda_check(cudaMemcpy(&g, global_header_.data(), sizeof g, cudaMemcpyDeviceToHost), "read queues");
  std::vector<detail::ring_header> shared(static_cast<std::size_t>(max_workers_));
  cuda_check(cudaMemcpy(shared.data(), shared_headers_.data(), shared.size() * sizeof(detail::ring_header), cudaMemcpyDeviceToHost),
             "read queues");
  // A ring's published-and-unclaimed count is `items`; a consumer that has reserved items but not
  // yet moved head is done with them once the run is over, so tail - head counts what is queued.
  q.global_items = static_cast<std::int64_t>(g.tail - g.head) + c.locked_count;
  for (const detail::ring_header& h : shared) q.shared_items += static_cast<std::int64_t>(h.tail - h.head);
  q.list_empty = c.list_head == nullptr;
  q.reset_pending = c.dirty != 0;
  return q;
}

inline run_result run_ticket::wait() const {
  if (captured_)
    throw error(status::invalid_argument, "run_ticket::wait: the run was captured into a CUDA graph; synchronise the "
                                          "stream the graph is launched on, then read gpu_scheduler::last_result()");
  if (seq_ != sched_->enqueued_)
    throw error(status::invalid_argument, "run_ticket::wait: a later run of this scheduler has been enqueued since; "
                                          "its result replaces this one's (wait for the latest ticket)");
  const cudaError_t e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess) {
    run_result r;
    r.code = status::device_error;
    r.message = std::string("persistent kernel: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
    return r;
  }
  return sched_->last_result();
}

inline bool run_ticket::ready() const { return cudaStreamQuery(stream_) == cudaSuccess; }

}  // namespace canopy
