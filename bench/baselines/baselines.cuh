// SPDX-License-Identifier: Apache-2.0
// What a user writes instead of a scheduler for the octree upward pass (float payloads), as
// callable GPU functions over a device_octree's ref and a device_payloads<float>:
//
//   (a) level_kernels: one kernel launch for all leaves, then one per tree level, deepest first;
//   (b) level_graph:   the same launches captured once in a CUDA graph, replayed per run;
//   (c) last_arriver:  one kernel; the last child to arrive at a node merges it and climbs
//                      (Karras 2012).
//
// The benchmark loops over them with baseline_runner:
//
//   canopy::trees::device_octree d_tree(tree);
//   canopy::trees::device_payloads<float> out(d_tree.node_count());
//   canopy::bench::baseline_runner runner(d_tree, out);   // allocates counters, captures the graph
//   for (auto kind : canopy::bench::all_baseline_kinds) {
//     canopy::bench::run_baseline(kind, runner, stream);  // enqueues one full upward pass
//     ...check out.download() with compare_payloads, then time run_baseline with time_gpu...
//   }
//
// Every function only enqueues work on `stream` (nothing synchronises); launch errors throw
// canopy::cuda_error, bad arguments std::invalid_argument. See README.md beside this file.
#pragma once

#include <canopy/passes/device_octree.cuh>
#include <canopy/trees/multipole.hpp>

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace canopy::bench {

enum class baseline_kind { level_kernels, level_graph, last_arriver };

// How the level baselines cut the pass into launches (both: depth + 1 launches).
enum class level_layout {
  // baseline_runner times both on the tree at construction and keeps the faster, as a user tuning
  // for their tree would (launch_level_kernels alone: leaves_first).
  automatic,
  // One launch for every leaf (P2M), then one per level merging its internal nodes, with
  // merge_group_size lanes per node. Best on small and adaptive trees (Plummer 1M on an H100: 42
  // against 66 µs), where the deep levels hold few nodes.
  leaves_first,
  // One launch per level doing its leaves (P2M) and its internal nodes (merges) with group_size
  // lanes per node: the bandwidth-bound P2M of a level hides its latency-bound merges. Best on large
  // adaptive trees (Plummer 16M: 326 against 360 µs).
  per_level,
};

inline constexpr std::array<baseline_kind, 3> all_baseline_kinds{
    baseline_kind::level_kernels, baseline_kind::level_graph, baseline_kind::last_arriver};

// "level-kernels", "level-graph", "last-arriver".
std::string_view to_string(baseline_kind kind) noexcept;
// The names above (ASCII case-insensitive, '_' accepted for '-'); throws std::invalid_argument.
baseline_kind parse_baseline_kind(std::string_view name);

// Launch shape, for tuning on the device (the benchmark may sweep it); 0 picks automatically.
struct baseline_options {
  // Lanes that compute one node together: 1, 2, 4, 8, 16 or 32 (0: auto_group_size). A leaf's
  // points are read interleaved across the group, a node's children merged in parallel across it.
  int group_size = 0;
  // Children's payloads a lane loads before merging them: 1, 2 or 4 (capped at what the group
  // size leaves per lane; 0: 4 for a launch too small to fill the device at the occupancy that
  // costs, else 1). More loads in flight shorten the dependent climb near the root; fewer held
  // payloads (17 registers each) raise occupancy for big levels.
  int child_batch = 0;
  // Lanes that merge one internal node's children in the level baselines (the leaves are
  // group_size's): 1 .. 32 as above; 0: 8, one lane per child, so that all of a node's children are
  // loaded at once and a level's launch is eight times wider (the levels are latency-bound: at
  // depth 5 the 4,096-node level took 8 µs with 2 lanes of 4 children each, under ncu).
  int merge_group_size = 0;
  level_layout layout = level_layout::automatic;
};

// About four points per lane: mean leaf size >= 32 -> 8, >= 16 -> 4, >= 8 -> 2, else 1.
int auto_group_size(const trees::octree_ref& tree) noexcept;

// Minimum bytes an upward pass moves: every point read once (16 B), every
// payload written once and every non-root payload read once by its parent (sizeof(multipole<float>)).
std::size_t upward_pass_bytes(const trees::octree_ref& tree) noexcept;

// (a) Enqueues depth + 1 launches. leaves_first (and automatic): every leaf by P2M (whatever its
// level: leaves need nothing), then level depth - 1 down to level 0, level L merging the internal
// nodes of [level_offset[L], level_offset[L + 1]) from their children (M2M). per_level: level depth
// down to 0, each computing all its nodes, leaves by P2M and internal nodes by M2M.
// `level_offset` is the host copy (device_octree::level_offset()). out has node_count entries.
void launch_level_kernels(const trees::octree_ref& tree, std::span<const std::int32_t> level_offset,
                          trees::multipole<float>* out, cudaStream_t stream = nullptr,
                          const baseline_options& options = {});

// (b) The launches of (a) captured once into a CUDA graph and instantiated; launch() replays it.
// Pointers are baked into the graph: the tree and the payloads must outlive it and stay put.
// Move-only; owns the cudaGraph_t and cudaGraphExec_t.
class level_graph {
 public:
  level_graph() = default;
  level_graph(const trees::octree_ref& tree, std::span<const std::int32_t> level_offset,
              trees::multipole<float>* out, const baseline_options& options = {});
  level_graph(const level_graph&) = delete;
  level_graph& operator=(const level_graph&) = delete;
  level_graph(level_graph&& other) noexcept;
  level_graph& operator=(level_graph&& other) noexcept;
  ~level_graph();

  void launch(cudaStream_t stream = nullptr) const;  // a no-op for an empty tree
  int kernel_count() const noexcept { return kernel_count_; }

 private:
  void release() noexcept;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  int kernel_count_ = 0;
};

// (c) Enqueues the single last-arriver kernel: one lane group per leaf, P2M, then the last child
// to arrive at a node (device-scope acq_rel fetch_add on arrivals[node]) merges it and climbs.
// `arrivals` has node_count entries, all zero before the first run; each run leaves them zero.
// Runs sharing one `arrivals` array must not overlap (same stream, or synchronised).
void launch_last_arriver(const trees::octree_ref& tree, std::int32_t* arrivals, trees::multipole<float>* out,
                         cudaStream_t stream = nullptr, const baseline_options& options = {});

// (c) with its arrival counters: allocated and zeroed once (the only memset), reset by the kernel.
class last_arriver {
 public:
  last_arriver() = default;
  explicit last_arriver(std::int32_t node_count);
  void launch(const trees::octree_ref& tree, trees::multipole<float>* out, cudaStream_t stream = nullptr,
              const baseline_options& options = {});
  std::int32_t* arrivals() const noexcept { return arrivals_.data(); }

 private:
  canopy::device_buffer<std::int32_t> arrivals_;
};

// Everything the three baselines need for one (tree, payloads) pair, prepared once: the host copy
// of level_offset, the arrival counters, the captured graph. With layout automatic it captures the
// level graph in both layouts, replays each 3 + 7 times (CUDA events, the payloads overwritten)
// and keeps the faster one for both level baselines. The tree and the payloads must
// outlive the runner. Move-only.
class baseline_runner {
 public:
  // Throws std::invalid_argument when payloads.size() != tree.node_count() or an option is out of
  // range; cuda_error when an allocation or the capture fails.
  baseline_runner(const trees::device_octree& tree, trees::device_payloads<float>& payloads,
                  const baseline_options& options = {});

  // Enqueues one full upward pass of `kind` into the payloads.
  void run(baseline_kind kind, cudaStream_t stream = nullptr);

  int group_size() const noexcept { return options_.group_size; }  // resolved (never 0)
  // The level baselines' layout: the faster one on this tree when automatic was asked for.
  level_layout layout() const noexcept { return options_.layout; }
  const baseline_options& options() const noexcept { return options_; }
  const trees::octree_ref& tree() const noexcept { return tree_; }
  trees::multipole<float>* payloads() const noexcept { return out_; }

 private:
  trees::octree_ref tree_;
  std::vector<std::int32_t> level_offset_;
  trees::multipole<float>* out_ = nullptr;
  baseline_options options_;
  last_arriver last_arriver_;
  level_graph graph_;
};

// Enqueues one full upward pass of `kind` (runner.run(kind, stream)).
inline void run_baseline(baseline_kind kind, baseline_runner& runner, cudaStream_t stream = nullptr) {
  runner.run(kind, stream);
}

}  // namespace canopy::bench
