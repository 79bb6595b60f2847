// SPDX-License-Identifier: Apache-2.0
// The adaptive octree built on the GPU from points already in device memory: node for node,
// bit for bit the tree build_octree builds on the host (same root cube, Morton codes, stable
// order, splits, cell bounds, leaves; the same input_error for a rejected point), left on the
// device as a device_octree that feeds the GPU upward pass.
//
//   canopy::trees::device_octree_builder builder;          // keep it: its workspace is reused
//   canopy::trees::built_device_octree result;
//   builder.build_into(d_points, n, {32, 21}, result, stream);
//   upward_pass<<<...>>>(result.tree.ref(), ...);            // same stream: no sync needed
//   canopy::trees::octree host = result.download(stream);    // when the host wants it
//
// Steps, all enqueued on the caller's stream: the bounding box and the rejected-point check (one
// cub::DeviceReduce over the points); the root cube (octree_steps.hpp's bounding_cube, the host's
// double arithmetic); 63-bit Morton codes (morton.hpp); one cub::DeviceRadixSort of (code, index)
// pairs over bits [0, 63) (stable: equal codes keep input order, like the host's sort); the
// gather of the points into Morton order; then the tree without a level loop (octree_steps.hpp,
// "the flat build"): every point's span of node levels from a sliding maximum over windows of
// max_leaf + 1 sorted codes (two cub::DeviceScan::InclusiveScanByKey), the leaf starts
// (cub::DeviceSelect) and the node count per level; one (level, leaf start) pair per node, sorted
// stably by level (a one-pass cub::DeviceRadixSort) numbers the nodes as build_octree does; one
// thread per node then finds its links by binary searches over that numbering and writes them with
// its point range, level and cell box, and the leaves in Morton order.
//
// Host synchronisation: one per build, after the spans (the rejected-point check, the leaf count
// and the nodes per level, which size the node arrays and give the host its level_offset). It
// waits for the box, codes, sort, gather and spans; the nodes are then emitted behind it on the
// stream. No per-level or per-node host work. (A build that must grow a buffer also waits for the
// stream before freeing the old one.)
//
// Memory (device_octree_builder::workspace_bytes() reports what is held; the GPU test prints it
// per point): the workspace is 20 bytes per point (two 8-byte code buffers for the sort, one
// 4-byte index buffer; after the sort the free code buffer holds the window levels and their
// scans, then the leaf starts, and the free index buffer the points' spans) plus 10 bytes per
// node (the (level, leaf start) pairs, twice for the sort; 12.5 with the 25% growth slack) plus CUB's temporary storage. The
// result holds 16 (points) + 4 (permutation) bytes per point and 69 bytes per node (parent,
// first_child, child_count, point_begin, point_count, level, 48-byte bounds) plus 4 per leaf.
// Buffers grow and never shrink; build_into() reuses the result's buffers too, so a steady stream
// of builds of similar size allocates nothing.
//
// Host code (g++ or nvcc): the kernels and CUB live in src/device_octree_builder.cu, built only
// with CANOPY_GPU. Not thread-safe: one builder builds one tree at a time; successive builds may
// use different streams (each waits for the previous one's work on the builder's workspace).
#pragma once

#include <canopy/cuda/device_buffer.hpp>
#include <canopy/passes/device_octree.cuh>
#include <canopy/trees/box.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/point.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace canopy::trees {

// Points in device memory as structure of arrays: point i is {x[i], y[i], z[i], m[i]}.
struct device_points_soa {
  const float* x = nullptr;
  const float* y = nullptr;
  const float* z = nullptr;
  const float* m = nullptr;
};

// What the builder produces: the device tree the upward pass reads, plus what build_octree's
// octree also has (level, bounds) and the permutation back to the caller's order. Buffers may be
// longer than the tree (capacity kept for the next build_into); the tree is the first
// tree.node_count() / tree.point_total() entries.
struct built_device_octree {
  device_octree tree;                        // points in Morton order, structure, leaves, level_offset
  device_buffer<std::uint8_t> level;         // per node
  device_buffer<box> bounds;                 // per node: its cubic cell, as build_octree's bounds
  device_buffer<std::int32_t> permutation;   // per point: sorted position -> index in the input

  // The whole tree as build_octree returns it (all arrays, points included); waits for `stream`.
  octree download(cudaStream_t stream = nullptr) const;
  // permutation[i] = the input index of tree point i; waits for `stream`.
  std::vector<std::int32_t> download_permutation(cudaStream_t stream = nullptr) const;
  // Device bytes held (capacity, not size).
  std::size_t bytes() const noexcept;
};

// Where a build's time went (set_phase_timing), in ms of CUDA events between the phases, on the
// build's stream: box (bounding box, rejected points, root cube), keys (Morton codes), sort (the
// radix sort), gather (points into Morton order), spans (every point's levels, the leaf starts
// and the node count per level, then the build's one host round trip), nodes (numbered and
// emitted, leaves included).
struct build_phase_times {
  double box, keys, sort, gather, spans, nodes;
};

class device_octree_builder {
 public:
  device_octree_builder();
  ~device_octree_builder();
  device_octree_builder(const device_octree_builder&) = delete;
  device_octree_builder& operator=(const device_octree_builder&) = delete;
  device_octree_builder(device_octree_builder&&) noexcept;
  device_octree_builder& operator=(device_octree_builder&&) noexcept;

  // Builds the octree of the `count` points at `points` (device memory; AoS, 16-byte aligned as
  // cudaMalloc gives) into `out`, reusing out's buffers where they are large enough. No work may
  // still use `out` when this is called. Returns once the node count is known; the nodes may
  // still be being emitted: use the result in stream order, or synchronise `stream`.
  // Throws input_error for bad options (max_leaf < 1, max_depth outside [0, 21]), more than
  // 2^31 - 1 points, a rejected point (as build_octree: "device_octree_builder: point 17 (nan, 0,
  // 0, m 1) is not finite"), or a tree of more than 2^31 - 1 nodes; std::invalid_argument for a
  // null or host pointer; cuda_error when CUDA fails. After a throw `out` is empty and the builder
  // remains usable.
  void build_into(const point* points, std::size_t count, const build_options& options, built_device_octree& out,
                  cudaStream_t stream = nullptr);
  void build_into(const device_points_soa& points, std::size_t count, const build_options& options,
                  built_device_octree& out, cudaStream_t stream = nullptr);

  // The same into a new result (which allocates its buffers each time: prefer build_into for
  // repeated builds).
  built_device_octree build(const point* points, std::size_t count, const build_options& options = {},
                            cudaStream_t stream = nullptr);
  built_device_octree build(const device_points_soa& points, std::size_t count, const build_options& options = {},
                            cudaStream_t stream = nullptr);

  // Grows the per-point workspace for `points` points now (build_into grows it when needed).
  void reserve(std::size_t points, cudaStream_t stream = nullptr);

  // Device bytes the workspace holds now (code and index buffers, level buffers, CUB temporary
  // storage); the result's buffers are counted by built_device_octree::bytes().
  std::size_t workspace_bytes() const noexcept;

  // Records events between the phases of the next builds (off by default: seven event records per
  // build); last_phase_times() waits for the last build and returns them, nullopt if it was not timed
  // (or was empty).
  void set_phase_timing(bool on);
  std::optional<build_phase_times> last_phase_times() const;

  struct state;  // the workspace, a pinned status word and an event (src/device_octree_builder.cu)

 private:
  std::unique_ptr<state> state_;  // made on the first build: constructing a builder makes no CUDA call
};

}  // namespace canopy::trees
