// SPDX-License-Identifier: Apache-2.0
// The definitions of canopy/gpu_scheduler.cuh, which includes this file at its end: the
// scheduler's set-up, the launch of the persistent kernel and the reading of a run's result.
// Not a header of its own: include canopy/gpu_scheduler.cuh.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "canopy/cuda/device.hpp"
#include "canopy/cuda/error.hpp"
#include "canopy/detail/check_options.hpp"
#include "canopy/detail/kernel_common.cuh"
#include "canopy/detail/ops_traits.cuh"
#include "canopy/detail/persistent_kernel.cuh"
#include "canopy/detail/scheduler_state.hpp"

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
/// 64 us, whatever the grid. At full occupancy the grid-sized cap above still lets the idle blocks
/// poll often enough to slow each hop of a deep DAG; a block idle that long has nothing near, and
/// the longer sleep takes it off the shared lines (see bench/RESULTS.md).
inline constexpr std::uint32_t auto_idle_sleep_long_ns = 65536;

/// The static shared memory of `kernel`: the runtime's few words, and whatever __shared__ arrays
/// the Ops's bodies declare (the FMM's staging slabs, 18 to 42 KB). Looked up once a kernel: a
/// cudaFuncGetAttributes call costs about a microsecond, and every enqueue asks.
inline std::size_t static_shared_bytes(const void* kernel) {
  static std::mutex lock;
  static std::vector<std::pair<const void*, std::size_t>> known;
  const std::lock_guard<std::mutex> hold(lock);
  for (const auto& [k, bytes] : known)
    if (k == kernel) return bytes;
  cudaFuncAttributes attr{};
  cuda_check(cudaFuncGetAttributes(&attr, kernel), "cudaFuncGetAttributes");
  known.emplace_back(kernel, attr.sharedSizeBytes);
  return attr.sharedSizeBytes;
}

/// Lets `kernel` be launched with `bytes` of dynamic shared memory. The limit is a property of the
/// kernel, not of a scheduler, so it is only ever raised: a second scheduler with a smaller private
/// queue used to lower it under the first, whose next launch then failed. Static and dynamic
/// shared memory together need the opt-in above 48 KB, so the kernel's static bytes count.
inline void allow_dynamic_shared_bytes(const void* kernel, std::size_t bytes) {
  if (static_shared_bytes(kernel) + bytes <= 48 * 1024) return;
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
}}  // namespace detail

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
  // The kernel reads the graph as a DAG exactly when succ_offsets is not null: successor lists left
  // from an earlier DAG would make it read a new tree as that DAG, so a tree drops them (and a DAG
  // the parent array, which it does not use).
  if (graph.is_tree()) {
    succ_offsets_ = device_buffer<std::int32_t>();
    succ_ = device_buffer<task_id>();
    grow(parent_, n);
  } else {
    parent_ = device_buffer<task_id>();
    grow(succ_offsets_, n + 1);
    grow(succ_, static_cast<std::size_t>(graph.edge_count()));
    cuda_check(cudaMemcpyAsync(succ_offsets_.data(), graph.succ_offsets(), (n + 1) * sizeof(std::int32_t), cudaMemcpyDeviceToDevice,
                               stream),
               "copy graph");
    if (graph.edge_count() != 0)
      cuda_check(cudaMemcpyAsync(succ_.data(), graph.successors(), static_cast<std::size_t>(graph.edge_count()) * sizeof(task_id),
                                 cudaMemcpyDeviceToDevice, stream),
                 "copy graph");
  }
  grow(dependency_count_, n);
  grow(pending_, n);
  grow(sources_, sources);
  if (n != 0) {
    if (graph.is_tree())
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
  if (!host_graph_ && succ_offsets_.size() != 0) {
    // A DAG given on the device: its edges (the sources come out in ascending order).
    const auto n = static_cast<std::size_t>(task_count_);
    std::vector<std::int32_t> offsets(n + 1);
    cuda_check(cudaMemcpy(offsets.data(), succ_offsets_.data(), (n + 1) * sizeof(std::int32_t), cudaMemcpyDeviceToHost), "read graph");
    std::vector<task_id> succ(static_cast<std::size_t>(offsets[n]));
    if (!succ.empty())
      cuda_check(cudaMemcpy(succ.data(), succ_.data(), succ.size() * sizeof(task_id), cudaMemcpyDeviceToHost), "read graph");
    std::vector<std::pair<task_id, task_id>> edges;
    edges.reserve(succ.size());
    for (std::size_t t = 0; t < n; ++t)
      for (std::int32_t k = offsets[t]; k < offsets[t + 1]; ++k)
        edges.emplace_back(static_cast<task_id>(t), succ[static_cast<std::size_t>(k)]);
    host_graph_ = task_graph::from_edges(task_count_, edges);
  }
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
  // statically (static_sources), and a first fetch takes exactly one chunk; later claims take a
  // chunk at a time too. Only the first options_.dealt_sources (-1 = all) are dealt: the chunks
  // stop there, and the blocks past them start by claiming.
  const std::int64_t per_block = (static_cast<std::int64_t>(gr.source_count) + grid - 1) / grid;
  const int chunk = static_cast<int>(std::min<std::int64_t>(std::max<std::int64_t>(per_block, 1), batch_max));  // batch_max <= threads
  const std::int64_t dealt = options_.dealt_sources < 0 ? gr.source_count : std::min(options_.dealt_sources, gr.source_count);
  const auto static_sources =
      static_cast<std::uint32_t>(traits_of(options_.mode).block_fetch ? std::min<std::int64_t>(std::int64_t{grid} * chunk, dealt) : 0);
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
  if (traits_of(m).linked_list_queue && !captured) {
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
    throw cuda_error(e, "persistent kernel: " + cuda_message(e));
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
    result.message = "persistent kernel: " + cuda_message(e);
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
    r.message = traits_of(options_.mode).linked_list_queue
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
    r.message = "persistent kernel: " + cuda_message(e);
    return r;
  }
  return sched_->last_result();
}

inline bool run_ticket::ready() const { return cudaStreamQuery(stream_) == cudaSuccess; }

inline void gpu_scheduler::set_mode(canopy::mode m) {
  if (!is_valid(m)) throw error(status::invalid_argument, "gpu backend: unknown mode " + std::to_string(static_cast<int>(m)));
  options_.mode = m;
}

inline void gpu_scheduler::set_push_policy(push_policy p) {
  if (!is_valid(p))
    throw error(status::invalid_argument, "gpu backend: unknown push policy " + std::to_string(static_cast<int>(p)));
  options_.policy = p;
}

inline void gpu_scheduler::request_abort() {
  if (report_.host() == nullptr) return;  // a moved-from scheduler runs nothing
  cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(report_->abort_requested).store(1, cuda::std::memory_order_relaxed);
}

inline void gpu_scheduler::request_abort_clear() {
  cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(report_->abort_requested).store(0, cuda::std::memory_order_relaxed);
}

}  // namespace canopy
