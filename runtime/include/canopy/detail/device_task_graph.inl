// SPDX-License-Identifier: Apache-2.0
// The definitions of canopy/device_task_graph.cuh, which includes this file at its end: the
// build's kernels (detail::graph_build, over the per-element steps of graph_build_steps.hpp), the
// steps both factories share, and the members. Not a header of its own: include
// canopy/device_task_graph.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "canopy/config.hpp"
#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/error.hpp"
#include "canopy/detail/graph_build_steps.hpp"
#include "canopy/status.hpp"
#include "canopy/task_graph.hpp"

namespace canopy {

namespace detail::graph_build {

inline constexpr int block = 256;

/// What one build reports to the host; the one read at build time copies it.
struct record {
  unsigned long long fault;  // the smallest key of the checks before the read
  unsigned long long cycle;  // the cycle check's smallest key
  std::int32_t sinks;        // roots
  std::int32_t sources;      // tasks without children
  std::uint32_t id_order;    // parent_below | parent_above over all edges
  std::int32_t pad;
};

__device__ inline void propose(record* r, unsigned long long key) {
  if (key != no_fault) atomicMin(&r->fault, key);
}

/// Adds one per lane to counter[p] for the lanes with `valid`, one atomic per distinct p in the
/// warp: siblings usually sit in neighbouring lanes (the octree's children are contiguous), so an
/// octree makes about one atomic per parent, and a star 1/32 of a plain atomicAdd's.
__device__ inline void warp_count(std::int32_t* counter, task_id p, bool valid) {
  const unsigned active = __ballot_sync(0xffffffffu, valid);
  if (!valid) return;
  const unsigned peers = __match_any_sync(active, p);
  if (static_cast<int>(threadIdx.x % 32) == __ffs(peers) - 1) atomicAdd(counter + p, __popc(peers));
}

/// A block's roots and the OR of its order bits, one atomic each per block.
__device__ inline void block_report(record* r, bool root, unsigned order_bits) {
  const int roots = __syncthreads_count(root);
  const int below = __syncthreads_or(order_bits & parent_below);
  const int above = __syncthreads_or(order_bits & parent_above);
  if (threadIdx.x == 0) {
    if (roots != 0) atomicAdd(&r->sinks, roots);
    const unsigned bits = (below ? parent_below : 0u) | (above ? parent_above : 0u);
    if (bits != 0) atomicOr(&r->id_order, bits);
  }
}

template <int B>
__global__ void __launch_bounds__(B) fill_kernel(std::int32_t* a, std::int64_t n, std::int32_t value) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * B + threadIdx.x;
  if (i < n) a[i] = value;
}

// from_parents: copy the parent array, check it, count each task's children, the roots and the id order.
template <int B>
__global__ void __launch_bounds__(B) parents_kernel(const task_id* in, task_id* parent, std::int32_t* dependency_count,
                                                    std::int32_t n, record* r) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * B + threadIdx.x;  // every thread reaches the barriers
  const bool here = i < n;
  const auto t = static_cast<task_id>(i);
  const task_id p = here ? in[i] : no_task;
  if (here) parent[i] = p;
  const unsigned long long key = here ? check_parent(t, p, n) : no_fault;
  propose(r, key);
  const bool edge = here && key == no_fault && p != no_task;
  warp_count(dependency_count, p, edge);
  block_report(r, here && p == no_task, edge ? id_order_bits(t, p) : 0u);
}

// from_parents: the leaves, once every child has been counted.
template <int B>
__global__ void __launch_bounds__(B) count_leaves_kernel(const std::int32_t* dependency_count, std::int32_t n, record* r) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * B + threadIdx.x;
  const int leaves = __syncthreads_count(i < n && dependency_count[i] == 0);
  if (threadIdx.x == 0 && leaves != 0) atomicAdd(&r->sources, leaves);
}

// from_children: check each task's child range, copy its count, count the leaves.
template <int B>
__global__ void __launch_bounds__(B) children_kernel(const std::int32_t* first_child, const std::int32_t* child_count,
                                                     std::int32_t* dependency_count, std::int32_t n, record* r) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * B + threadIdx.x;
  const bool here = i < n;
  const std::int32_t k = here ? child_count[i] : 0;
  const std::int32_t f = here && k > 0 ? first_child[i] : 0;  // a leaf's first_child is not read
  if (here) {
    dependency_count[i] = k;
    propose(r, check_children(static_cast<task_id>(i), f, k, n));
  }
  const int leaves = __syncthreads_count(here && k == 0);
  if (threadIdx.x == 0 && leaves != 0) atomicAdd(&r->sources, leaves);
}

/// The scan's input: usable_children(p), and 0 at p = n so that offsets[n] is the total.
struct usable_children_fn {
  const std::int32_t* first_child;
  const std::int32_t* child_count;
  std::int32_t n;
  __host__ __device__ std::int64_t operator()(std::int32_t p) const {
    if (p >= n) return 0;
    const std::int32_t k = child_count[p];
    return usable_children(p, k > 0 ? first_child[p] : 0, k, n);
  }
};

// from_children: every child slot proposes its parent to its child (lo: min, hi: max).
template <int B>
__global__ void __launch_bounds__(B) slots_kernel(const std::int32_t* first_child, const std::int64_t* offsets, std::int32_t n,
                                                  std::int32_t* lo, std::int32_t* hi) {
  const std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * B + threadIdx.x;
  if (e >= slots_to_visit(offsets[n], n)) return;
  const task_id p = slot_parent(offsets, n, e);
  const std::int32_t c = first_child[p] + static_cast<std::int32_t>(e - offsets[p]);
  atomicMin(lo + c, p);
  atomicMax(hi + c, p);
}

// from_children: each task's parent from what its slots proposed; the roots and the id order.
template <int B>
__global__ void __launch_bounds__(B) settle_kernel(task_id* parent, const std::int32_t* hi, std::int32_t n, record* r) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * B + threadIdx.x;
  const bool here = i < n;
  const auto c = static_cast<task_id>(i);
  task_id p = no_task;
  if (here) {
    propose(r, settle_parent(c, parent[i], hi[i], p));
    parent[i] = p;
  }
  block_report(r, here && p == no_task, here ? id_order_bits(c, p) : 0u);
}

// A caller's sources order: entries in range and leaves; then the first index of each entry.
template <int B>
__global__ void __launch_bounds__(B) order_kernel(const task_id* order, std::int32_t count, const std::int32_t* dependency_count,
                                                  std::int32_t n, std::int32_t* first_index, record* r) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * B + threadIdx.x;
  if (i >= count) return;
  const task_id s = order[i];
  const unsigned long long key = check_source(static_cast<std::int32_t>(i), s, n, dependency_count);
  propose(r, key);
  if (key == no_fault) atomicMin(first_index + s, static_cast<std::int32_t>(i));
}
template <int B>
__global__ void __launch_bounds__(B) order_repeat_kernel(const task_id* order, std::int32_t count, const std::int32_t* dependency_count,
                                                         std::int32_t n, const std::int32_t* first_index, record* r) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * B + threadIdx.x;
  if (i >= count) return;
  const task_id s = order[i];
  if (check_source(static_cast<std::int32_t>(i), s, n, dependency_count) != no_fault) return;  // reported already
  propose(r, check_source_repeat(static_cast<std::int32_t>(i), first_index[s]));
}

// The cycle check.
template <int B>
__global__ void __launch_bounds__(B) jump_start_kernel(const task_id* parent, std::int32_t n, task_id* next) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * B + threadIdx.x;
  if (i < n) next[i] = jump_start(static_cast<task_id>(i), parent[i]);
}
template <int B>
__global__ void __launch_bounds__(B) jump_kernel(const task_id* in, std::int32_t n, task_id* out) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * B + threadIdx.x;
  if (i < n) out[i] = in[in[i]];
}
template <int B>
__global__ void __launch_bounds__(B) reaches_root_kernel(const task_id* parent, const task_id* next, std::int32_t n, record* r) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * B + threadIdx.x;
  if (i >= n) return;
  const unsigned long long key = check_reaches_root(static_cast<task_id>(i), parent[next[i]]);
  if (key != no_fault) atomicMin(&r->cycle, key);
}

struct is_leaf_fn {
  const std::int32_t* dependency_count;
  __host__ __device__ bool operator()(std::int32_t t) const { return dependency_count[t] == 0; }
};

inline unsigned blocks_for(std::int64_t items) { return static_cast<unsigned>((items + block - 1) / block); }

inline void check_launch(const char* what) { cuda_check(cudaGetLastError(), what); }

inline std::size_t round_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

/// Reads one int32 from the device (the error path only).
inline std::int32_t read_one(const std::int32_t* d, std::int64_t index, cudaStream_t stream) {
  std::int32_t v = 0;
  cuda_check(cudaMemcpyAsync(&v, d + index, sizeof v, cudaMemcpyDeviceToHost, stream), "device task graph: read fault details");
  cuda_check(cudaStreamSynchronize(stream), "device task graph: read fault details");
  return v;
}

}  // namespace detail::graph_build

inline std::byte* device_graph_workspace::reserve(std::size_t bytes) {
  if (bytes > buffer_.size()) {
    buffer_ = device_buffer<std::byte>();  // free first: the old contents are not needed
    buffer_ = device_buffer<std::byte>(bytes);
  }
  return buffer_.data();
}

inline device_task_graph::device_task_graph(device_task_graph&& other) noexcept { *this = std::move(other); }

inline device_task_graph& device_task_graph::operator=(device_task_graph&& other) noexcept {
  if (this != &other) {
    if (ready_ != nullptr) (void)cudaEventDestroy(ready_);
    ready_ = std::exchange(other.ready_, nullptr);
    parent_ = std::move(other.parent_);
    succ_offsets_ = std::move(other.succ_offsets_);
    succ_ = std::move(other.succ_);
    dependency_count_ = std::move(other.dependency_count_);
    sources_ = std::move(other.sources_);
    task_count_ = std::exchange(other.task_count_, 0);
    source_count_ = std::exchange(other.source_count_, 0);
    sink_count_ = std::exchange(other.sink_count_, 0);
    edge_count_ = std::exchange(other.edge_count_, 0);
  }
  return *this;
}

inline device_task_graph::~device_task_graph() {
  if (ready_ != nullptr) (void)cudaEventDestroy(ready_);
}

inline void device_task_graph::wait_ready(cudaStream_t stream) const {
  if (ready_ != nullptr) cuda_check(cudaStreamWaitEvent(stream, ready_, 0), "device task graph: wait for a trusted build");
}

inline task_graph_ref device_task_graph::ref(std::int32_t* pending) const noexcept {
  const bool tree = is_tree();
  return task_graph_ref{task_count_, tree ? parent_.data() : nullptr, tree ? nullptr : succ_offsets_.data(),
                        tree ? nullptr : succ_.data(), dependency_count_.data(), pending, sources_.data(), source_count_,
                        sink_count_};
}

inline task_graph device_task_graph::download() const {
  if (ready_ != nullptr) cuda_check(cudaEventSynchronize(ready_), "device task graph: download");
  if (!is_tree()) {
    // A DAG: its edges, from which task_graph derives the rest (its sources in ascending order).
    std::vector<std::int32_t> offsets(static_cast<std::size_t>(task_count_) + 1);
    std::vector<task_id> succ(static_cast<std::size_t>(edge_count_));
    cuda_check(cudaMemcpy(offsets.data(), succ_offsets_.data(), offsets.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost),
               "device task graph: download");
    if (!succ.empty())
      cuda_check(cudaMemcpy(succ.data(), succ_.data(), succ.size() * sizeof(task_id), cudaMemcpyDeviceToHost),
                 "device task graph: download");
    std::vector<std::pair<task_id, task_id>> edges;
    edges.reserve(succ.size());
    for (std::int32_t t = 0; t < task_count_; ++t)
      for (std::int32_t k = offsets[static_cast<std::size_t>(t)]; k < offsets[static_cast<std::size_t>(t) + 1]; ++k)
        edges.emplace_back(t, succ[static_cast<std::size_t>(k)]);
    return task_graph::from_edges(task_count_, edges);
  }
  std::vector<task_id> parent(static_cast<std::size_t>(task_count_));
  std::vector<task_id> sources(static_cast<std::size_t>(source_count_));
  if (!parent.empty())
    cuda_check(cudaMemcpy(parent.data(), parent_.data(), parent.size() * sizeof(task_id), cudaMemcpyDeviceToHost),
               "device task graph: download");
  if (!sources.empty())
    cuda_check(cudaMemcpy(sources.data(), sources_.data(), sources.size() * sizeof(task_id), cudaMemcpyDeviceToHost),
               "device task graph: download");
  return task_graph::from_parents(parent, sources);
}

/// One build: the arguments, the scratch and the steps after the graph-specific kernels.
struct device_task_graph::build {
  using record = detail::graph_build::record;

  device_task_graph g;
  cudaStream_t stream;
  std::int32_t n;
  const task_id* order;
  std::int32_t order_count;
  cycle_check cycles;
  device_graph_workspace local;  // used when the caller gives none
  device_graph_workspace* ws;
  // Scratch, carved from the workspace.
  record* rec = nullptr;
  task_id* num_selected = nullptr;
  void* cub_temp = nullptr;
  std::size_t cub_bytes = 0;
  std::int32_t* words = nullptr;  // 2n + 2 int32: [A | B], or n + 1 int64 offsets (from_children)
  std::int32_t* hi = nullptr;     // n int32 (from_children)

  build(std::int32_t count, cudaStream_t s, const task_id* d_order, std::int32_t d_order_count, const device_graph_options& o)
      : stream(s), n(count), order(d_order), order_count(d_order_count), cycles(o.cycles), ws(o.workspace ? o.workspace : &local) {
    if (n < 0) throw error(status::invalid_argument, "device task graph: negative task count " + std::to_string(n));
    if (n == INT32_MAX) throw error(status::invalid_argument, "device task graph: too many tasks");
    if (order_count < 0 && order != nullptr)
      throw error(status::invalid_argument, "device task graph: sources_order given with a negative source_count");
    if (order_count > 0 && order == nullptr)
      throw error(status::invalid_argument,
                  "device task graph: source_count " + std::to_string(order_count) + " given without sources_order");
    g.task_count_ = n;
  }

  /// Carves the scratch: the record, CUB's temporary storage, and the words.
  void reserve(std::size_t cub, std::size_t word_count, std::size_t hi_count) {
    const std::size_t rec_bytes = detail::graph_build::round_up(sizeof(record) + sizeof(task_id));
    const std::size_t cub_room = detail::graph_build::round_up(cub);
    const std::size_t word_bytes = detail::graph_build::round_up(word_count * sizeof(std::int32_t));
    std::byte* base = ws->reserve(rec_bytes + cub_room + word_bytes + hi_count * sizeof(std::int32_t));
    rec = reinterpret_cast<record*>(base);
    num_selected = reinterpret_cast<task_id*>(base + sizeof(record));
    cub_temp = base + rec_bytes;
    cub_bytes = cub;
    words = reinterpret_cast<std::int32_t*>(base + rec_bytes + cub_room);
    hi = hi_count != 0 ? reinterpret_cast<std::int32_t*>(base + rec_bytes + cub_room + word_bytes) : nullptr;
    // The two keys to no_fault (all ones), the counts and order bits to zero.
    cuda_check(cudaMemsetAsync(rec, 0xff, 2 * sizeof(unsigned long long), stream), "device task graph: reset");
    cuda_check(cudaMemsetAsync(&rec->sinks, 0, sizeof(record) - 2 * sizeof(unsigned long long), stream), "device task graph: reset");
  }

  /// CUB's temporary storage for selecting the leaves in id order (0 with a caller's order).
  std::size_t select_bytes() const {
    std::size_t bytes = 0;
    if (order_count < 0)
      cuda_check(cub::DeviceSelect::If(nullptr, bytes, thrust::counting_iterator<std::int32_t>(0), static_cast<task_id*>(nullptr),
                                       static_cast<task_id*>(nullptr), n, detail::graph_build::is_leaf_fn{nullptr}, stream),
                 "device task graph: cub::DeviceSelect::If (size)");
    return bytes;
  }
  /// Scratch words the order check (n) and the cycle check (2n) may need (from_parents).
  std::size_t check_words() const {
    const auto n_words = static_cast<std::size_t>(n);
    return cycles != cycle_check::never ? 2 * n_words + 2 : order_count > 0 ? n_words : 0;
  }

  /// The order check (after dependency_count is complete), then the one read, then the rest.
  device_task_graph finish(const std::int32_t* d_first_child, const std::int32_t* d_child_count) {
    using namespace detail::graph_build;
    const std::int32_t* dep = g.dependency_count_.data();
    if (order_count > 0) {
      std::int32_t* first_index = words;  // A: n entries (none when n = 0: every entry is out of range)
      if (n > 0) fill_kernel<block><<<blocks_for(n), block, 0, stream>>>(first_index, n, INT32_MAX);
      order_kernel<block><<<blocks_for(order_count), block, 0, stream>>>(order, order_count, dep, n, first_index, rec);
      order_repeat_kernel<block><<<blocks_for(order_count), block, 0, stream>>>(order, order_count, dep, n, first_index, rec);
      check_launch("device task graph: sources order kernels");
    }
    // The one device-to-host read of a build: the fault key and the counts, which the host needs
    // to size the sources and to launch the scheduler. Pageable, so synchronous.
    record r{};
    cuda_check(cudaMemcpyAsync(&r, rec, sizeof r, cudaMemcpyDeviceToHost, stream), "device task graph: read counts");
    cuda_check(cudaStreamSynchronize(stream), "device task graph: read counts");
    const bool check = cycles == cycle_check::always || (cycles == cycle_check::automatic && !ids_prove_acyclic(r.id_order));
    if (r.fault != no_fault) {
      // Read the fault's details now: the cycle check reuses the scratch (first_index among it).
      const std::string message = describe(r.fault, d_first_child, d_child_count);
      if (fault_class(key_fault(r.fault)) == 0) throw error(status::invalid_argument, message);  // parents unusable
      if (check) check_cycles();  // a cycle is worse than a bad sources order
      throw error(status::invalid_argument, message);
    }
    if (check) check_cycles();
    if (order_count >= 0 && order_count != r.sources)
      throw error(status::invalid_argument, source_count_message(order_count, r.sources));

    g.sink_count_ = r.sinks;
    g.source_count_ = r.sources;
    g.sources_ = device_buffer<task_id>(static_cast<std::size_t>(r.sources));
    if (order_count >= 0) {
      if (r.sources > 0)
        cuda_check(cudaMemcpyAsync(g.sources_.data(), order, g.sources_.bytes(), cudaMemcpyDeviceToDevice, stream),
                   "device task graph: copy sources order");
    } else if (n > 0) {
      // Stable: the leaves in ascending id order. Its count lands in num_selected, unread: the
      // host knows it already.
      std::size_t bytes = cub_bytes;
      cuda_check(cub::DeviceSelect::If(cub_temp, bytes, thrust::counting_iterator<std::int32_t>(0), g.sources_.data(), num_selected,
                                       n, is_leaf_fn{dep}, stream),
                 "device task graph: cub::DeviceSelect::If");
    }
    // Complete on return, so that any stream may use the graph (and a temporary workspace may go).
    cuda_check(cudaStreamSynchronize(stream), "device task graph: build");
    return std::move(g);
  }

  /// Pointer jumping over the words (A, B); throws on the smallest task that reaches no root.
  void check_cycles() {
    using namespace detail::graph_build;
    if (n == 0) return;
    task_id* a = words;
    task_id* b = words + n;
    jump_start_kernel<block><<<blocks_for(n), block, 0, stream>>>(g.parent_.data(), n, a);
    for (int round = jump_rounds(n); round > 0; --round) {
      jump_kernel<block><<<blocks_for(n), block, 0, stream>>>(a, n, b);
      std::swap(a, b);
    }
    reaches_root_kernel<block><<<blocks_for(n), block, 0, stream>>>(g.parent_.data(), a, n, rec);
    check_launch("device task graph: cycle check kernels");
    unsigned long long key = no_fault;
    cuda_check(cudaMemcpyAsync(&key, &rec->cycle, sizeof key, cudaMemcpyDeviceToHost, stream), "device task graph: read cycle check");
    cuda_check(cudaStreamSynchronize(stream), "device task graph: read cycle check");
    if (key == no_fault) return;
    // The error path: the whole parent array to the host, to name the cycle.
    const std::vector<task_id> parent = g.parent_.download();
    const std::vector<task_id> cycle = find_cycle(parent, key_where(key));
    throw error(status::invalid_argument, fault_message(key, {}, n, cycle));
  }

  /// The message of `key`, after reading the few values it names (the error path only).
  std::string describe(unsigned long long key, const std::int32_t* d_first_child, const std::int32_t* d_child_count) {
    using namespace detail::graph_build;
    const std::int32_t w = key_where(key);
    fault_details d;
    switch (key_fault(key)) {
      case fault::parent_out_of_range: d.a = read_one(g.parent_.data(), w, stream); break;
      case fault::negative_child_count: d.a = read_one(d_child_count, w, stream); break;
      case fault::children_out_of_range:
      case fault::own_child:
        d.a = read_one(d_first_child, w, stream);
        d.b = read_one(d_child_count, w, stream);
        break;
      case fault::two_parents:
        d.a = read_one(g.parent_.data(), w, stream);  // settle_kernel left the smallest parent there
        d.b = read_one(hi, w, stream);
        break;
      case fault::order_out_of_range: d.a = read_one(order, w, stream); break;
      case fault::order_not_leaf:
        d.a = read_one(order, w, stream);
        d.b = read_one(g.dependency_count_.data(), d.a, stream);
        break;
      case fault::order_duplicate:
        d.a = read_one(order, w, stream);
        d.b = read_one(words, d.a, stream);  // first_index
        break;
      default: break;
    }
    return fault_message(key, d, n);
  }
};

inline device_task_graph device_task_graph::from_parents(const task_id* d_parent, std::int32_t n, cudaStream_t stream,
                                                         const task_id* d_sources_order, std::int32_t source_count,
                                                         const device_graph_options& options) {
  using namespace detail::graph_build;
  build b(n, stream, d_sources_order, source_count, options);
  if (n > 0 && d_parent == nullptr)
    throw error(status::invalid_argument, "device task graph: null parent array for " + std::to_string(n) + " tasks");
  b.g.parent_ = device_buffer<task_id>(static_cast<std::size_t>(n));
  b.g.dependency_count_ = device_buffer<std::int32_t>(static_cast<std::size_t>(n));
  b.reserve(b.select_bytes(), b.check_words(), 0);
  if (n > 0) {
    b.g.dependency_count_.fill_bytes(0, stream);
    parents_kernel<block><<<blocks_for(n), block, 0, stream>>>(d_parent, b.g.parent_.data(), b.g.dependency_count_.data(), n, b.rec);
    count_leaves_kernel<block><<<blocks_for(n), block, 0, stream>>>(b.g.dependency_count_.data(), n, b.rec);
    check_launch("device task graph: parent kernels");
  }
  return b.finish(nullptr, nullptr);
}

inline device_task_graph device_task_graph::from_children(const std::int32_t* d_first_child, const std::int32_t* d_child_count,
                                                          std::int32_t n, cudaStream_t stream, const task_id* d_sources_order,
                                                          std::int32_t source_count, const device_graph_options& options) {
  using namespace detail::graph_build;
  build b(n, stream, d_sources_order, source_count, options);
  if (n > 0 && (d_first_child == nullptr || d_child_count == nullptr))
    throw error(status::invalid_argument, "device task graph: null first_child or child_count array for " + std::to_string(n) + " tasks");
  b.g.parent_ = device_buffer<task_id>(static_cast<std::size_t>(n));
  b.g.dependency_count_ = device_buffer<std::int32_t>(static_cast<std::size_t>(n));
  // The scan's input is computed on the fly (usable_children of each task), its output the slot
  // offsets in int64: n + 1 of them fill the 2n + 2 words, which the order and cycle checks reuse.
  const auto counts = thrust::make_transform_iterator(thrust::counting_iterator<std::int32_t>(0),
                                                      usable_children_fn{d_first_child, d_child_count, n});
  std::size_t scan_bytes = 0;
  cuda_check(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, counts, static_cast<std::int64_t*>(nullptr), n + 1, stream),
             "device task graph: cub::DeviceScan::ExclusiveSum (size)");
  b.reserve(std::max(scan_bytes, b.select_bytes()), 2 * static_cast<std::size_t>(n) + 2, static_cast<std::size_t>(n));
  if (n > 0) {
    auto* offsets = reinterpret_cast<std::int64_t*>(b.words);  // 256-byte aligned
    task_id* lo = b.g.parent_.data();
    children_kernel<block><<<blocks_for(n), block, 0, stream>>>(d_first_child, d_child_count, b.g.dependency_count_.data(), n, b.rec);
    std::size_t bytes = b.cub_bytes;
    cuda_check(cub::DeviceScan::ExclusiveSum(b.cub_temp, bytes, counts, offsets, n + 1, stream), "device task graph: cub::DeviceScan::ExclusiveSum");
    fill_kernel<block><<<blocks_for(n), block, 0, stream>>>(lo, n, no_parent_yet);
    fill_kernel<block><<<blocks_for(n), block, 0, stream>>>(b.hi, n, no_parent_max);
    slots_kernel<block><<<blocks_for(static_cast<std::int64_t>(n) + 1), block, 0, stream>>>(d_first_child, offsets, n, lo, b.hi);
    settle_kernel<block><<<blocks_for(n), block, 0, stream>>>(lo, b.hi, n, b.rec);
    check_launch("device task graph: child kernels");
  }
  return b.finish(d_first_child, d_child_count);
}

inline device_task_graph device_task_graph::from_trusted_forest(const task_id* d_parent, const std::int32_t* d_dependency_count,
                                                                std::int32_t n, const task_id* d_sources, std::int32_t source_count,
                                                                std::int32_t sink_count, cudaStream_t stream) {
  device_task_graph g;
  g.assign_trusted_forest(d_parent, d_dependency_count, n, d_sources, source_count, sink_count, stream);
  return g;
}

inline void device_task_graph::assign_trusted_forest(const task_id* d_parent, const std::int32_t* d_dependency_count, std::int32_t n,
                                                     const task_id* d_sources, std::int32_t source_count, std::int32_t sink_count,
                                                     cudaStream_t stream) {
  if (n < 0 || n == INT32_MAX) throw error(status::invalid_argument, "device task graph: task count " + std::to_string(n) + " out of range");
  if (source_count < 0 || source_count > n || sink_count < 0 || sink_count > n || (n > 0 && (source_count == 0 || sink_count == 0)))
    throw error(status::invalid_argument, "device task graph: a trusted forest of " + std::to_string(n) + " tasks with " +
                                              std::to_string(source_count) + " sources and " + std::to_string(sink_count) +
                                              " roots (a non-empty forest has at least one of each, at most one per task)");
  if (n > 0 && (d_parent == nullptr || d_dependency_count == nullptr || d_sources == nullptr))
    throw error(status::invalid_argument, "device task graph: null parent, dependency_count or sources array for a trusted forest");
  // Empty until the copies are enqueued, so that a throw below leaves an empty graph, not a stale one.
  task_count_ = source_count_ = sink_count_ = edge_count_ = 0;
  succ_offsets_ = device_buffer<std::int32_t>();  // a forest: no successor lists
  succ_ = device_buffer<task_id>();
  const auto tasks = static_cast<std::size_t>(n);
  const auto sources = static_cast<std::size_t>(source_count);
  const auto grow = [](auto& buffer, std::size_t need) {
    using T = std::remove_pointer_t<decltype(buffer.data())>;
    if (buffer.size() >= need) return;
    buffer = device_buffer<T>();  // free first
    buffer = device_buffer<T>(need + need / 2);
  };
  grow(parent_, tasks);
  grow(dependency_count_, tasks);
  grow(sources_, sources);
  if (ready_ == nullptr) cuda_check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "device task graph: event");
  if (n > 0) {
    cuda_check(cudaMemcpyAsync(parent_.data(), d_parent, tasks * sizeof(task_id), cudaMemcpyDeviceToDevice, stream),
               "device task graph: copy parents");
    cuda_check(cudaMemcpyAsync(dependency_count_.data(), d_dependency_count, tasks * sizeof(std::int32_t), cudaMemcpyDeviceToDevice,
                               stream),
               "device task graph: copy dependency counts");
    cuda_check(cudaMemcpyAsync(sources_.data(), d_sources, sources * sizeof(task_id), cudaMemcpyDeviceToDevice, stream),
               "device task graph: copy sources");
  }
  cuda_check(cudaEventRecord(ready_, stream), "device task graph: event");
  task_count_ = n;
  source_count_ = source_count;
  sink_count_ = sink_count;
}

inline device_task_graph device_task_graph::from_trusted_dag(const std::int32_t* d_succ_offsets, const task_id* d_succ,
                                                             std::int32_t n, std::int32_t edge_count,
                                                             const std::int32_t* d_dependency_count, const task_id* d_sources,
                                                             std::int32_t source_count, std::int32_t sink_count,
                                                             cudaStream_t stream) {
  if (n < 0 || n == INT32_MAX) throw error(status::invalid_argument, "device task graph: task count " + std::to_string(n) + " out of range");
  if (edge_count < 0 || source_count < 0 || source_count > n || sink_count < 0 || sink_count > n ||
      (n > 0 && (source_count == 0 || sink_count == 0)))
    throw error(status::invalid_argument, "device task graph: a trusted DAG of " + std::to_string(n) + " tasks with " +
                                              std::to_string(edge_count) + " edges, " + std::to_string(source_count) +
                                              " sources and " + std::to_string(sink_count) +
                                              " sinks (a non-empty DAG has at least one source and one sink)");
  if (n > 0 && (d_succ_offsets == nullptr || d_dependency_count == nullptr || d_sources == nullptr ||
                (edge_count > 0 && d_succ == nullptr)))
    throw error(status::invalid_argument,
                "device task graph: null succ_offsets, successors, dependency_count or sources array for a trusted DAG");
  device_task_graph g;
  const auto tasks = static_cast<std::size_t>(n);
  const auto edges = static_cast<std::size_t>(edge_count);
  const auto sources = static_cast<std::size_t>(source_count);
  // At least one element each: an empty succ_offsets buffer is what marks a forest.
  g.succ_offsets_ = device_buffer<std::int32_t>(tasks + 1);
  g.succ_ = device_buffer<task_id>(std::max<std::size_t>(edges, 1));
  g.dependency_count_ = device_buffer<std::int32_t>(tasks);
  g.sources_ = device_buffer<task_id>(sources);
  cuda_check(cudaEventCreateWithFlags(&g.ready_, cudaEventDisableTiming), "device task graph: event");
  if (n > 0) {
    cuda_check(cudaMemcpyAsync(g.succ_offsets_.data(), d_succ_offsets, (tasks + 1) * sizeof(std::int32_t), cudaMemcpyDeviceToDevice,
                               stream),
               "device task graph: copy successor offsets");
    if (edges != 0)
      cuda_check(cudaMemcpyAsync(g.succ_.data(), d_succ, edges * sizeof(task_id), cudaMemcpyDeviceToDevice, stream),
                 "device task graph: copy successors");
    cuda_check(cudaMemcpyAsync(g.dependency_count_.data(), d_dependency_count, tasks * sizeof(std::int32_t),
                               cudaMemcpyDeviceToDevice, stream),
               "device task graph: copy dependency counts");
    cuda_check(cudaMemcpyAsync(g.sources_.data(), d_sources, sources * sizeof(task_id), cudaMemcpyDeviceToDevice, stream),
               "device task graph: copy sources");
  } else {
    cuda_check(cudaMemsetAsync(g.succ_offsets_.data(), 0, sizeof(std::int32_t), stream), "device task graph: empty DAG");
  }
  cuda_check(cudaEventRecord(g.ready_, stream), "device task graph: event");
  g.task_count_ = n;
  g.source_count_ = source_count;
  g.sink_count_ = sink_count;
  g.edge_count_ = edge_count;
  return g;
}

}  // namespace canopy
