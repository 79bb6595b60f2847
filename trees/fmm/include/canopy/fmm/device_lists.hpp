// SPDX-License-Identifier: Apache-2.0
// The FMM's preparation on the GPU, from the GPU-built octree (trees/passes'
// device_octree_builder) with no host copy of the tree: the cells' geometry, the interaction lists
// and the task DAG, each the device twin of a host function and equal to it:
//
//   compute_cell_geometry(built)            = compute_cell_geometry(host tree), bit for bit
//   build_interaction_lists(built, g, th)   = build_interaction_lists(host tree, ...) after
//                                              sort_sources (every list sorted by source id)
//   build_task_dag(built, lists)            = build_task_dag(host tree, sorted lists): the same
//                                              ranges, task-to-node maps, level lists and
//                                              predecessors of every task
//
//   canopy::trees::built_device_octree built = builder.build(d_points, n, {32}, stream);
//   auto geometry = canopy::fmm::compute_cell_geometry(built, stream);
//   auto lists = canopy::fmm::build_interaction_lists(built, geometry, 0.5, stream);
//   auto dag = canopy::fmm::build_task_dag(built, lists, stream);
//   // or all of it: canopy::fmm::gpu_evaluator fmm(8, built, 0.5, eps2);
//
// Host code (g++ or nvcc); the kernels and CUB are in src/device_lists.cu (canopy::fmm_gpu).
// Everything is enqueued on `stream`; the host waits where it needs a size: the lists once per
// level of the pair traversal (below), the DAG twice. Results are complete in `stream`'s order
// (each function synchronises `stream` before it returns, so any stream may use them).
//
// Scratch: each function's temporaries (at 16M Plummer points, some 15 GB for the lists' keys and
// their sort) come from `scratch`, a memory pool of the caller's, in `stream`'s order
// (cudaMallocFromPoolAsync, cudaFreeAsync), or from cudaMalloc and cudaFree when it is null (the
// default). A caller that builds again and again gives a pool that keeps what is freed
// (cudaMemPoolAttrReleaseThreshold at UINT64_MAX): the next build then reuses its memory with no
// driver call, where cudaMalloc and cudaFree cost about 0.2 and 0.8 ms a GB on an H200 (at 16M
// points the evaluator's set-up went from 101 to 62 ms; bench/RESULTS.md, "The FMM's set-up").
// The memory stays in the pool until the caller trims or destroys it (and cudaMalloc cannot use
// it meanwhile). The frees are enqueued on `stream` after the function's last synchronisation, so
// `stream` may still hold them when it returns (the results are complete). The results are
// device_buffers either way.
#pragma once

#include <canopy/cuda/device_buffer.hpp>
#include <canopy/fmm/interaction_lists.hpp>
#include <canopy/fmm/task_dag.hpp>
#include <canopy/passes/device_octree_builder.cuh>
#include <canopy/task_graph.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

namespace canopy::fmm {

/// A memory pool for the functions' `scratch` that keeps what is freed (its release threshold at
/// UINT64_MAX), on the current device and destroyed with the handle; null where the device has no
/// memory pools (cudaDevAttrMemoryPoolsSupported), so that the set-up keeps cudaMalloc. What it
/// keeps stays reserved, out of cudaMalloc's reach, until cudaMemPoolTrimTo or the handle's end.
/// Throws canopy::cuda_error.
struct memory_pool_deleter {
  void operator()(cudaMemPool_t pool) const noexcept { (void)cudaMemPoolDestroy(pool); }
};
using memory_pool = std::unique_ptr<std::remove_pointer_t<cudaMemPool_t>, memory_pool_deleter>;
memory_pool make_kept_pool();

/// compute_cell_geometry on the device: one cell_geometry per node of `tree`, by node id. The mass
/// sums go up the tree level by level (a thread per node, children in order, as the host does), the
/// radius is the largest distance to the node's points (a warp per leaf takes the largest over its
/// points for each of its ancestors: exact, so the order does not matter).
device_buffer<cell_geometry> compute_cell_geometry(const trees::built_device_octree& tree, cudaStream_t stream = nullptr,
                                                   cudaMemPool_t scratch = nullptr);

/// interaction_lists in device memory, by node id (node_count + 1 offsets, as the host's); each
/// target's sources sorted by id.
struct device_interaction_lists {
  device_buffer<std::int32_t> m2l_offset, m2l_source, p2p_offset, p2p_source;
  std::int32_t node_count = 0;
  std::int32_t m2l_count = 0;  ///< entries of m2l_source
  std::int32_t p2p_count = 0;  ///< entries of p2p_source
  /// The host form (synchronous), for checks.
  interaction_lists download() const;
};

/// build_interaction_lists on the device: the host's dual tree traversal, the same pairs and the
/// same decisions (detail/geometry_ops.hpp), run breadth first. Every (target, source) pair the
/// host's stack would pop is independent of the others, so a level of the traversal is a frontier
/// of pairs, and one kernel per level decides each pair and writes what it makes (its children
/// pairs, an M2L or a P2P pair) at places a block reserves with one atomic per kind (frontier
/// expansion, as in Merrill, Garland and Grimshaw's GPU breadth-first search, PPoPP 2012, with
/// block-level instead of device-wide scans). The pairs are then sorted by (target, source) with a
/// radix sort and cut into CSR rows, so the order in which a level wrote them does not matter.
/// The host reads three counts per level of the traversal (about twice the tree's depth); a level
/// whose outputs overflow the buffers' first guesses runs again into larger ones.
/// Throws std::invalid_argument as the host function does (theta outside (0, 1], a geometry not of
/// this tree).
device_interaction_lists build_interaction_lists(const trees::built_device_octree& tree,
                                                 const device_buffer<cell_geometry>& geometry, double theta,
                                                 cudaStream_t stream = nullptr, cudaMemPool_t scratch = nullptr);

/// What build_task_dag builds: the task-to-node maps and level lists (which the level-by-level
/// baseline runs from) and the graph's edges, or the maps alone. The edges are most of the DAG's
/// set-up time and memory (at 16M Plummer points, 637M edges: the M2L lists transposed by a radix
/// sort of their 627M entries), which a caller that never runs the DAG need not pay for.
enum class dag_parts {
  maps_and_graph,
  maps_only,
};

/// task_dag on the device (task_dag.hpp's header comment says what each task waits for): the
/// task-to-node maps, has_local, the level lists of the baseline, and the graph in the
/// scheduler's DAG form (successors in CSR, dependency counts, sources in ascending id order as
/// canopy::task_graph has them, sink count), which gpu_scheduler takes through
/// canopy::device_task_graph::from_trusted_dag. Built with dag_parts::maps_only, the graph's
/// arrays are empty and has_graph is false.
struct device_task_dag {
  task_ranges ranges;
  std::int32_t node_count = 0;
  device_buffer<std::int32_t> m2l_target, down_node, l2p_leaf, p2p_leaf, p2p_point, internal_node;
  device_buffer<std::uint8_t> has_local;
  // Host copies: the baseline sizes its launches per level from them (depth + 2 entries each).
  std::vector<std::int32_t> internal_level_offset, down_level_offset;
  // The graph: successors of task t are successor[succ_offset[t], succ_offset[t + 1]).
  device_buffer<std::int32_t> succ_offset;  // task_count + 1
  device_buffer<std::int32_t> successor;    // edge_count
  device_buffer<std::int32_t> dependency_count;
  device_buffer<std::int32_t> sources;      // source_count
  std::int32_t edge_count = 0, source_count = 0, sink_count = 0;
  bool has_graph = false;  // false: built with dag_parts::maps_only (no edges, counts or sources)

  std::int32_t task_count() const { return ranges.end; }
  /// The graph as a canopy::task_graph (from its edges; synchronous), for checks and diagnosis.
  /// Throws std::logic_error without one (has_graph false).
  canopy::task_graph download_graph() const;
  /// The task-to-node maps and level lists as a host task_dag (graph included, empty without
  /// one; synchronous).
  task_dag download() const;
};

/// build_task_dag on the device, of the same `shape` (task_dag.hpp: what an m2l task waits for).
/// The up tasks' successors are the M2L lists transposed: a warp per m2l task turns its row into
/// (waited-for node, m2l task) pairs, merging equal waits of the row (they are adjacent: the rows
/// are sorted by source id), and a radix sort of the waited-for nodes' bit_width(nodes) bits
/// groups them by up task. Two host reads (one with dag_parts::maps_only, which stops before the
/// transposition). Throws std::invalid_argument when the lists are not of this tree or the shape
/// is not valid.
device_task_dag build_task_dag(const trees::built_device_octree& tree, const device_interaction_lists& lists,
                               cudaStream_t stream = nullptr, const dag_shape& shape = {},
                               dag_parts parts = dag_parts::maps_and_graph, cudaMemPool_t scratch = nullptr);

}  // namespace canopy::fmm
