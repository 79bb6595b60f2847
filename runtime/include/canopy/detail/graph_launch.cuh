// SPDX-License-Identifier: Apache-2.0
// Launching the persistent kernel through cached one-node CUDA graphs.
//
// Why: a cooperative kernel launched as an instantiated graph returns from the stream
// synchronisation sooner than the same kernel through cudaLaunchCooperativeKernel, as long as the
// graph's parameters need no update; updating them before each launch gives part of the gain back.
// So a graph is kept for every parameter set that
// repeats: one per kernel and grid, and its parameters are updated only when the caller's Ops or
// the scheduler's state changed since that graph's last launch.
//
// The first launch of each cached configuration pays for building and instantiating its graph.
// Ops are compared byte for byte: an Ops type with padding bytes (which may differ between two
// otherwise equal temporaries) can cost an update on every run, never a wrong launch.
//
// A driver that refuses cooperative kernel nodes (not supported, or the attribute does not read
// back as set) makes the launcher fall back to cudaLaunchCooperativeKernel for good; any other
// failure to build a graph (out of memory, say) falls back for that launch only. Host-only; not
// thread-safe (like the scheduler that owns it).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "canopy/detail/scheduler_state.hpp"

namespace canopy::detail {

class graph_launcher {
 public:
  graph_launcher() = default;
  ~graph_launcher() { clear(); }
  graph_launcher(const graph_launcher&) = delete;
  graph_launcher& operator=(const graph_launcher&) = delete;
  graph_launcher(graph_launcher&& o) noexcept
      : entries_(std::move(o.entries_)), updates_(o.updates_), unavailable_(o.unavailable_) {
    o.entries_.clear();
  }
  graph_launcher& operator=(graph_launcher&& o) noexcept {
    if (this != &o) {
      clear();
      entries_ = std::move(o.entries_);
      o.entries_.clear();
      updates_ = o.updates_;
      unavailable_ = o.unavailable_;
    }
    return *this;
  }

  /// Enqueues kernel<<<grid, threads, smem, stream>>>(ops, ref) as a cooperative launch, through a
  /// graph cached under (kernel, grid, threads, smem) when `use_graph` is set. Returns the
  /// launch's error (cudaSuccess once enqueued).
  template <class Ops>
  cudaError_t launch(const void* kernel, int grid, int threads, std::size_t smem, const Ops& ops,
                     const scheduler_ref& ref, cudaStream_t stream, bool use_graph) {
    Ops ops_copy = ops;
    scheduler_ref ref_copy = ref;
    void* args[] = {&ops_copy, &ref_copy};
    const dim3 g(static_cast<unsigned>(grid)), b(static_cast<unsigned>(threads));
    auto direct = [&] { return cudaLaunchCooperativeKernel(kernel, g, b, args, smem, stream); };
    auto remember_ops = [&](std::vector<unsigned char>& v) {  // same size after the first: no allocation
      const auto* o = reinterpret_cast<const unsigned char*>(&ops);
      v.assign(o, o + sizeof(Ops));
    };
    if (!use_graph || unavailable_) return direct();
    cudaKernelNodeParams p{};
    p.func = const_cast<void*>(kernel);
    p.gridDim = g;
    p.blockDim = b;
    p.sharedMemBytes = static_cast<unsigned>(smem);
    p.kernelParams = args;
    for (entry& e : entries_) {
      if (e.kernel != kernel || e.grid != grid || e.threads != threads || e.smem != smem) continue;
      // Ops is compared byte for byte: padding that differs costs an update, never a wrong launch.
      if (!(e.ref == ref) || e.ops.size() != sizeof(Ops) || std::memcmp(e.ops.data(), &ops, sizeof(Ops)) != 0) {
        const cudaError_t u = cudaGraphExecKernelNodeSetParams(e.exec, e.node, &p);
        if (u != cudaSuccess) return u;
        ++updates_;
        e.ref = ref;
        remember_ops(e.ops);
      }
      return cudaGraphLaunch(e.exec, stream);
    }
    // Room first, so that no allocation can fail once the graph's handles exist (they would leak).
    entries_.reserve(max_entries);
    entry n{kernel, grid, threads, smem, {}, ref};
    remember_ops(n.ops);
    bool refused = false;  // the driver does not do cooperative kernel nodes
    cudaError_t e = cudaGraphCreate(&n.graph, 0);
    if (e == cudaSuccess) e = cudaGraphAddKernelNode(&n.node, n.graph, nullptr, 0, &p);
    cudaLaunchAttributeValue cooperative{};
    cooperative.cooperative = 1;
    if (e == cudaSuccess) {
      e = cudaGraphKernelNodeSetAttribute(n.node, cudaLaunchAttributeCooperative, &cooperative);
      cudaLaunchAttributeValue read_back{};
      if (e == cudaSuccess) e = cudaGraphKernelNodeGetAttribute(n.node, cudaLaunchAttributeCooperative, &read_back);
      refused = e == cudaErrorNotSupported || e == cudaErrorInvalidValue || (e == cudaSuccess && read_back.cooperative == 0);
    }
    if (e == cudaSuccess && !refused) {
      e = cudaGraphInstantiate(&n.exec, n.graph, 0);
      refused = e == cudaErrorNotSupported;
    }
    if (e != cudaSuccess || refused) {
      destroy(n);
      (void)cudaGetLastError();  // a failure to build a graph is not sticky: clear it, launch directly
      if (refused) unavailable_ = true;
      return direct();
    }
    if (entries_.size() == max_entries) {  // a scheduler cycling through many configurations: FIFO
      destroy(entries_.front());
      entries_.erase(entries_.begin());
    }
    entries_.push_back(std::move(n));
    return cudaGraphLaunch(entries_.back().exec, stream);
  }

  /// Destroys every cached graph (the destructor and move assignment).
  void clear() noexcept {
    for (entry& e : entries_) destroy(e);
    entries_.clear();
  }

  /// Cached graphs, and parameter updates of cached graphs so far (for tests).
  std::size_t size() const { return entries_.size(); }
  std::size_t updates() const { return updates_; }

 private:
  struct entry {
    const void* kernel;
    int grid, threads;
    std::size_t smem;
    std::vector<unsigned char> ops;  // the bytes of the Ops the graph's node holds
    scheduler_ref ref;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaGraphNode_t node = nullptr;
  };
  static void destroy(entry& e) noexcept {
    if (e.exec != nullptr) (void)cudaGraphExecDestroy(e.exec);
    if (e.graph != nullptr) (void)cudaGraphDestroy(e.graph);
    e.exec = nullptr;
    e.graph = nullptr;
  }
  // Each of the eight modes for two Ops types, or a few Ops types and grids.
  static constexpr std::size_t max_entries = 16;
  std::vector<entry> entries_;
  std::size_t updates_ = 0;
  bool unavailable_ = false;
};

}  // namespace canopy::detail
