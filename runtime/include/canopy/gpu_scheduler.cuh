// The GPU backend: a move-only host object that owns the device copy of a task graph, the queues
// and the run state, and launches the persistent kernel for a user's operation.
//
//   canopy::gpu_scheduler sched(graph, options);     // uploads, allocates once
//   canopy::run_result r = sched.run(my_ops);          // one cooperative launch + sync
//
// `Ops` is any trivially copyable type with `__device__ void operator()(canopy::task_id) const`.
// It is called exactly once per task, after all of the task's dependencies have returned, and
// whatever those wrote before returning is visible to it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "canopy/cuda/device.hpp"
#include "canopy/cuda/device_buffer.hpp"
#include "canopy/detail/graph_launch.cuh"
#include "canopy/detail/persistent_kernel.cuh"
#include "canopy/scheduler_options.hpp"
#include "canopy/status.hpp"
#include "canopy/task_graph.hpp"

namespace canopy {

namespace detail {

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw error(status::device_error, std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

template <class T>
T* device_alloc(std::size_t count) {
  T* p = nullptr;
  if (count == 0) count = 1;
  cuda_check(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc");
  return p;
}

template <class T>
T* device_copy(const std::vector<T>& host) {
  T* p = device_alloc<T>(host.size());
  if (!host.empty()) cuda_check(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return p;
}

template <class Ops, mode M>
constexpr const void* kernel_of() {
  return reinterpret_cast<const void*>(&persistent_kernel<Ops, M>);
}

template <class Ops>
const void* kernel_for(mode m) {
  switch (m) {
    case mode::mutex: return kernel_of<Ops, mode::mutex>();
    case mode::fixed_queue: return kernel_of<Ops, mode::fixed_queue>();
    case mode::private_queues: return kernel_of<Ops, mode::private_queues>();
    case mode::all_threads: return kernel_of<Ops, mode::all_threads>();
    case mode::lockfree_tree: return kernel_of<Ops, mode::lockfree_tree>();
    case mode::shared_queues: return kernel_of<Ops, mode::shared_queues>();
    case mode::lockfree: return kernel_of<Ops, mode::lockfree>();
    case mode::continuation: return kernel_of<Ops, mode::continuation>();
  }
  return nullptr;
}

/// The automatic cap of an idle block's sleep between polls: 4 ns per block of the grid, at least
/// 2 us, at most 64 us, so that the idle blocks of any grid together look at the shared lines (the
/// global queue's count, the stop flag) about once every 4 ns at most. On an H100 a full grid
/// (1,188 blocks) polling every 2 us made each dependent hop of a deep DAG cost 430-570 us
/// instead of 2-4 us, whether or not the working block itself read those lines; a cap of 4 us or
/// more brought it back to 2.3-5 us (tools/dev/poll_probe.cu, bench/RESULTS.md). A block reaches
/// the cap only after being idle about twice as long, so short gaps are unaffected; and in the
/// first part of a run the cap is lower still (1/64 of the elapsed time, at least 512 ns:
/// idle_sleep_cap in persistent_kernel.cuh), so that a short run's end is not held up.
constexpr std::uint32_t auto_idle_sleep_ns(int grid) {
  const std::int64_t ns = 4 * static_cast<std::int64_t>(grid);
  return static_cast<std::uint32_t>(ns < 2048 ? 2048 : ns > 65536 ? 65536 : ns);
}

}  // namespace detail

class gpu_scheduler {
 public:
  gpu_scheduler(const task_graph& graph, const scheduler_options& options);
  ~gpu_scheduler() { release(); }
  gpu_scheduler(const gpu_scheduler&) = delete;
  gpu_scheduler& operator=(const gpu_scheduler&) = delete;
  gpu_scheduler(gpu_scheduler&& o) noexcept { *this = std::move(o); }
  gpu_scheduler& operator=(gpu_scheduler&& o) noexcept;

  /// One run: a cooperative launch of the persistent kernel (through a cached CUDA graph unless
  /// options().graph_launch is false), then a stream synchronisation.
  template <class Ops>
  run_result run(const Ops& ops, cudaStream_t stream = nullptr);

  /// How many blocks of this mode's kernel can be co-resident for `Ops` (the default grid).
  template <class Ops>
  int max_blocks(canopy::mode m) const;

  const scheduler_options& options() const { return options_; }
  void set_mode(canopy::mode m) { options_.mode = m; }
  void set_push_policy(push_policy p) { options_.policy = p; }
  void set_graph_launch(bool on) { options_.graph_launch = on; }
  /// Launch graphs cached so far, and updates of their parameters (see detail::graph_launcher).
  std::size_t cached_launches() const { return launcher_.size(); }
  std::size_t launch_updates() const { return launcher_.updates(); }
  int sm_count() const { return sm_count_; }
  /// The grid of the last launch.
  int last_grid() const { return last_grid_; }
  /// Asks a run in progress to stop with status::aborted (any host thread).
  void request_abort() {
    cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(report_->abort_requested).store(1, cuda::std::memory_order_relaxed);
  }

 private:
  detail::scheduler_ref make_ref(int grid, int batch_max) const;  // batch_max: tasks a block fetches at most
  void reset_state(int grid, bool full, cudaStream_t stream);  // counters; full = queues and pending too
  run_result finish(int grid, cudaStream_t stream);
  void release() noexcept;

  task_graph graph_;  // host copy: failure diagnosis and resets
  scheduler_options options_;
  int device_ = 0, sm_count_ = 0, max_workers_ = 0;
  std::int32_t global_capacity_ = 1, shared_capacity_ = 1, private_capacity_ = 1;
  // device arrays
  task_id* parent_ = nullptr;
  std::int32_t* succ_offsets_ = nullptr;
  task_id* succ_ = nullptr;
  std::int32_t* dependency_count_ = nullptr;
  std::int32_t* pending_ = nullptr;
  task_id* sources_ = nullptr;
  ring_header* global_header_ = nullptr;
  std::uint64_t* global_slots_ = nullptr;
  task_id* locked_slots_ = nullptr;
  ring_header* shared_headers_ = nullptr;
  std::uint64_t* shared_slots_ = nullptr;
  detail::run_counters* counters_ = nullptr;  // two sets: runs alternate, each resets the other's
  int parity_ = 0;                            // the set the next run uses
  detail::run_report* report_ = nullptr;      // mapped pinned host memory
  detail::run_report* report_device_ = nullptr;
  int last_grid_ = -1;
  std::uint32_t static_sources_ = 0;  // of the last run: the failure report counts claimed sources
  bool need_full_reset_ = false;
  mutable std::vector<std::pair<const void*, int>> occupancy_cache_;
  detail::graph_launcher launcher_;
};

// ---------------------------------------------------------------------------------------------

inline gpu_scheduler::gpu_scheduler(const task_graph& graph, const scheduler_options& options)
    : graph_(graph), options_(options) {
  if (options.blocks < 0) throw error(status::invalid_argument, "gpu backend: blocks must be >= 0");
  if (options.threads_per_block < 32 || options.threads_per_block > detail::max_threads_per_block ||
      options.threads_per_block % 32 != 0)
    throw error(status::invalid_argument, "gpu backend: threads per block must be a multiple of 32 in 32..1024, not " +
                                              std::to_string(options.threads_per_block));
  if (options.global_queue_capacity < 0 || options.shared_queue_capacity < 0 || options.private_queue_capacity < 0)
    throw error(status::invalid_argument, "gpu backend: queue capacities must be >= 0 (0 = default)");
  if (options.deadline.count() <= 0) throw error(status::invalid_argument, "gpu backend: deadline must be positive");
  if (options.idle_sleep_max.count() < 0 || options.idle_sleep_max > std::chrono::milliseconds(1))
    throw error(status::invalid_argument, "gpu backend: idle sleep cap must be in 0..1 ms (0 = automatic)");
  if (!gpu_available()) throw error(status::device_error, "gpu backend: no CUDA device is available");
  detail::cuda_check(cudaGetDevice(&device_), "cudaGetDevice");
  cudaDeviceProp prop{};
  detail::cuda_check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
  if (!prop.cooperativeLaunch) throw error(status::device_error, "gpu backend: the device does not support cooperative launches");
  sm_count_ = prop.multiProcessorCount;
  max_workers_ = sm_count_ * (prop.maxThreadsPerMultiProcessor / options.threads_per_block);
  global_capacity_ = options.global_queue_capacity > 0 ? options.global_queue_capacity : std::max(1, graph.task_count());
  shared_capacity_ = options.shared_queue_capacity > 0 ? options.shared_queue_capacity : detail::default_shared_capacity;
  private_capacity_ = options.private_queue_capacity > 0 ? options.private_queue_capacity : detail::default_private_capacity;
  const std::size_t smem = detail::kernel_shared_bytes(options.threads_per_block, private_capacity_);
  if (smem > prop.sharedMemPerBlockOptin)
    throw error(status::invalid_argument, "gpu backend: private queue capacity " + std::to_string(private_capacity_) +
                                              " does not fit in shared memory");
  try {
    parent_ = graph.is_tree() ? detail::device_copy(graph.parent()) : nullptr;
    succ_offsets_ = graph.is_tree() ? nullptr : detail::device_copy(graph.succ_offsets());
    succ_ = graph.is_tree() ? nullptr : detail::device_copy(graph.successors());
    dependency_count_ = detail::device_copy(graph.dependency_count());
    pending_ = detail::device_copy(graph.dependency_count());
    sources_ = detail::device_copy(graph.sources());
    global_header_ = detail::device_alloc<ring_header>(1);
    global_slots_ = detail::device_alloc<std::uint64_t>(static_cast<std::size_t>(global_capacity_));
    locked_slots_ = detail::device_alloc<task_id>(static_cast<std::size_t>(global_capacity_));
    shared_headers_ = detail::device_alloc<ring_header>(static_cast<std::size_t>(max_workers_));
    shared_slots_ = detail::device_alloc<std::uint64_t>(static_cast<std::size_t>(max_workers_) * static_cast<std::size_t>(shared_capacity_));
    counters_ = detail::device_alloc<detail::run_counters>(2);
    detail::cuda_check(cudaHostAlloc(&report_, sizeof(detail::run_report), cudaHostAllocMapped), "cudaHostAlloc");
    *report_ = detail::run_report{0, no_task, 0, 0};
    detail::cuda_check(cudaHostGetDevicePointer(&report_device_, report_, 0), "cudaHostGetDevicePointer");
    need_full_reset_ = true;
  } catch (...) {
    release();
    throw;
  }
}

inline gpu_scheduler& gpu_scheduler::operator=(gpu_scheduler&& o) noexcept {
  if (this == &o) return *this;
  release();
  graph_ = std::move(o.graph_);
  options_ = o.options_;
  device_ = o.device_; sm_count_ = o.sm_count_; max_workers_ = o.max_workers_;
  global_capacity_ = o.global_capacity_; shared_capacity_ = o.shared_capacity_; private_capacity_ = o.private_capacity_;
  parent_ = std::exchange(o.parent_, nullptr);
  succ_offsets_ = std::exchange(o.succ_offsets_, nullptr);
  succ_ = std::exchange(o.succ_, nullptr);
  dependency_count_ = std::exchange(o.dependency_count_, nullptr);
  pending_ = std::exchange(o.pending_, nullptr);
  sources_ = std::exchange(o.sources_, nullptr);
  global_header_ = std::exchange(o.global_header_, nullptr);
  global_slots_ = std::exchange(o.global_slots_, nullptr);
  locked_slots_ = std::exchange(o.locked_slots_, nullptr);
  shared_headers_ = std::exchange(o.shared_headers_, nullptr);
  shared_slots_ = std::exchange(o.shared_slots_, nullptr);
  counters_ = std::exchange(o.counters_, nullptr);
  parity_ = o.parity_;
  report_ = std::exchange(o.report_, nullptr);
  report_device_ = std::exchange(o.report_device_, nullptr);
  last_grid_ = o.last_grid_;
  static_sources_ = o.static_sources_;
  need_full_reset_ = o.need_full_reset_;
  occupancy_cache_ = std::move(o.occupancy_cache_);
  launcher_ = std::move(o.launcher_);
  return *this;
}

inline void gpu_scheduler::release() noexcept {
  for (void* p : {static_cast<void*>(parent_), static_cast<void*>(succ_offsets_), static_cast<void*>(succ_),
                  static_cast<void*>(dependency_count_), static_cast<void*>(pending_), static_cast<void*>(sources_),
                  static_cast<void*>(global_header_), static_cast<void*>(global_slots_), static_cast<void*>(locked_slots_),
                  static_cast<void*>(shared_headers_), static_cast<void*>(shared_slots_), static_cast<void*>(counters_)})
    if (p != nullptr) cudaFree(p);
  if (report_ != nullptr) cudaFreeHost(report_);
  parent_ = succ_ = sources_ = locked_slots_ = nullptr;
  succ_offsets_ = dependency_count_ = pending_ = nullptr;
  global_header_ = shared_headers_ = nullptr;
  global_slots_ = shared_slots_ = nullptr;
  counters_ = nullptr;
  report_ = report_device_ = nullptr;
}

inline detail::scheduler_ref gpu_scheduler::make_ref(int grid, int batch_max) const {
  const auto& g = graph_;
  task_graph_ref gr{g.task_count(), parent_, succ_offsets_, succ_, dependency_count_, pending_, sources_,
                    static_cast<std::int32_t>(g.sources().size()), g.sink_count()};
  // Spread the sources over the whole grid on the first pass (one chunk per block), but never
  // more than a block's batch holds: the block modes deal the first chunk of every block
  // statically (static_sources), and a first fetch takes exactly one chunk.
  const std::int64_t per_block = (static_cast<std::int64_t>(gr.source_count) + grid - 1) / grid;
  const int chunk = static_cast<int>(std::min<std::int64_t>(std::max<std::int64_t>(per_block, 1), batch_max));  // batch_max <= threads
  const auto static_sources = static_cast<std::uint32_t>(traits_of(options_.mode).block_fetch ? grid * chunk : 0);
  return detail::scheduler_ref{gr,
                               global_header_,
                               global_slots_,
                               locked_slots_,
                               shared_headers_,
                               shared_slots_,
                               shared_capacity_,
                               grid,
                               private_capacity_,
                               chunk,
                               options_.policy,
                               counters_ + parity_,
                               counters_ + (1 - parity_),
                               report_device_,
                               static_cast<std::uint64_t>(options_.deadline.count()) * 1000000ull,
                               options_.idle_sleep_max.count() > 0  // <= 1 ms, checked by the constructor
                                   ? static_cast<std::uint32_t>(options_.idle_sleep_max.count())
                                   : detail::auto_idle_sleep_ns(grid),
                               static_sources,
                               batch_max};
}

inline void gpu_scheduler::reset_state(int grid, bool full, cudaStream_t stream) {
  const detail::run_counters c[2] = {detail::run_counters::initial(graph_.sink_count(), grid),
                                     detail::run_counters::initial(graph_.sink_count(), grid)};
  detail::cuda_check(cudaMemcpyAsync(counters_, c, sizeof c, cudaMemcpyHostToDevice, stream), "reset counters");
  parity_ = 0;
  if (full) {
    const ring_header g = ring_header::empty(global_capacity_);
    detail::cuda_check(cudaMemcpyAsync(global_header_, &g, sizeof g, cudaMemcpyHostToDevice, stream), "reset queue");
    detail::cuda_check(cudaMemsetAsync(global_slots_, 0, sizeof(std::uint64_t) * static_cast<std::size_t>(global_capacity_), stream), "reset queue");
    const std::vector<ring_header> s(static_cast<std::size_t>(max_workers_), ring_header::empty(shared_capacity_));
    detail::cuda_check(cudaMemcpyAsync(shared_headers_, s.data(), sizeof(ring_header) * s.size(), cudaMemcpyHostToDevice, stream), "reset queues");
    detail::cuda_check(cudaMemsetAsync(shared_slots_, 0, sizeof(std::uint64_t) * static_cast<std::size_t>(max_workers_) * static_cast<std::size_t>(shared_capacity_), stream), "reset queues");
    detail::cuda_check(cudaMemcpyAsync(pending_, dependency_count_, sizeof(std::int32_t) * graph_.dependency_count().size(),
                                       cudaMemcpyDeviceToDevice, stream), "reset counters");
  }
  // The host-side copies above read pageable memory synchronously before returning for small
  // sizes, but the vector `s` must outlive the copy in every case.
  detail::cuda_check(cudaStreamSynchronize(stream), "reset");
}

template <class Ops>
int gpu_scheduler::max_blocks(canopy::mode m) const {
  const void* kernel = detail::kernel_for<Ops>(m);
  // The occupancy query costs microseconds: answer repeated runs of the same kernel from a cache.
  for (const auto& [k, blocks] : occupancy_cache_)
    if (k == kernel) return blocks;
  const std::size_t smem = detail::kernel_shared_bytes(options_.threads_per_block, private_capacity_);
  if (smem > 48 * 1024)
    detail::cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
                       "cudaFuncSetAttribute");
  int per_sm = 0;
  detail::cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, options_.threads_per_block, smem),
                     "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  const int blocks = std::min(per_sm * sm_count_, max_workers_);
  occupancy_cache_.emplace_back(kernel, blocks);
  return blocks;
}

template <class Ops>
run_result gpu_scheduler::run(const Ops& ops, cudaStream_t stream) {
  static_assert(std::is_trivially_copyable_v<Ops>, "Ops is passed to the kernel by value: it must be trivially copyable");
  run_result result;
  if (graph_.task_count() == 0) return result;
  const mode m = options_.mode;
  const int resident = max_blocks<Ops>(m);
  if (resident == 0) {
    result.code = status::invalid_argument;
    result.message = "the " + std::string(to_string(m)) + " kernel cannot run " + std::to_string(options_.threads_per_block) +
                     " threads per block on this device (too many registers or too much shared memory)";
    return result;
  }
  if (options_.blocks > resident) {
    result.code = status::invalid_argument;
    result.message = "asked for " + std::to_string(options_.blocks) + " blocks, but at most " + std::to_string(resident) +
                     " blocks of the " + std::string(to_string(m)) + " kernel can be co-resident on this device";
    return result;
  }
  const int grid = options_.blocks > 0 ? options_.blocks : resident;
  if (m == mode::mutex) {
    // The seed's first design allocates a list node per push from the device heap. CUDA lets the
    // heap grow only before the first kernel that calls malloc; after that we run with what there
    // is, and an exhausted heap is reported as QueueOverflow.
    const std::size_t need = (static_cast<std::size_t>(graph_.task_count()) + 1024) * 64 + (8u << 20);
    std::size_t have = 0;
    detail::cuda_check(cudaDeviceGetLimit(&have, cudaLimitMallocHeapSize), "cudaDeviceGetLimit");
    if (need > have && cudaDeviceSetLimit(cudaLimitMallocHeapSize, need) != cudaSuccess) (void)cudaGetLastError();
  }
  if (need_full_reset_ || grid != last_grid_) reset_state(grid, need_full_reset_, stream);
  need_full_reset_ = false;
  last_grid_ = grid;
  report_->code = 0;
  report_->task = no_task;
  report_->abort_requested = 0;

  detail::scheduler_ref ref = make_ref(
      grid, detail::run_batch_max<Ops>(options_.threads_per_block, static_cast<std::int64_t>(graph_.sources().size()), grid));
  static_sources_ = ref.static_sources;
  const std::size_t smem = detail::kernel_shared_bytes(options_.threads_per_block, private_capacity_);
  cudaError_t e = launcher_.launch(detail::kernel_for<Ops>(m), grid, options_.threads_per_block, smem, parity_, ops, ref,
                                   stream, options_.graph_launch);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    need_full_reset_ = true;
    result.code = status::device_error;
    result.message = std::string("persistent kernel: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
    return result;
  }
  return finish(grid, stream);
}

inline run_result gpu_scheduler::finish(int grid, cudaStream_t stream) {
  run_result r;
  r.code = static_cast<status>(report_->code);
  r.task = report_->task;
  if (r.ok()) {
    parity_ = 1 - parity_;  // this run reset the other set for the next one
    return r;
  }
  need_full_reset_ = true;
  if (r.code == status::timeout) {
    std::vector<std::int32_t> pending(graph_.dependency_count().size());
    detail::cuda_check(cudaMemcpy(pending.data(), pending_, pending.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost),
                       "read counters");
    detail::run_counters c = detail::run_counters::initial(0, 0);
    detail::cuda_check(cudaMemcpy(&c, counters_ + parity_, sizeof c, cudaMemcpyDeviceToHost), "read counters");
    r.task = graph_.find_stuck_task(pending);
    r.message = "deadline of " + std::to_string(options_.deadline.count()) + " ms passed; task " + std::to_string(r.task) +
                " never became ready (" + std::to_string(c.sinks_left) + " of " + std::to_string(graph_.sink_count()) +
                " sinks unfinished, " + std::to_string(std::min<std::uint64_t>(std::uint64_t{c.source_cursor} + static_sources_, graph_.sources().size())) +
                " of " + std::to_string(graph_.sources().size()) + " sources claimed)";
  } else if (r.code == status::queue_overflow) {
    r.message = options_.mode == mode::mutex
                    ? "device heap exhausted allocating a queue node for task " + std::to_string(r.task)
                    : "global queue full (capacity " + std::to_string(global_capacity_) + ") while pushing task " +
                          std::to_string(r.task);
  } else if (r.code == status::aborted) {
    r.message = "run aborted by the host";
  }
  // Drop what the failed run left in the mutex mode's list (its nodes sit in the device heap;
  // the heap is reclaimed with the context) and start the next run from a clean state.
  reset_state(grid, true, stream);
  need_full_reset_ = false;
  return r;
}

}  // namespace canopy
