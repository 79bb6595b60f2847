// SPDX-License-Identifier: Apache-2.0
// The octree's two scheduler task graphs built on the device from a device tree, with no host copy
// of the tree: the node-task graph (make_upward_graph's) and the twig decomposition
// (make_twig_graph's), element for element the host's (tests/gpu/trees/device_pass_graphs_gpu_test).
//
//   canopy::device_graph_workspace ws;                      // keep it: scratch reused across steps
//   canopy::device_task_graph g = canopy::trees::make_device_upward_graph(built.tree.ref(), stream, &ws);
//   canopy::trees::device_twig_graph tg = canopy::trees::make_device_twig_graph(built.tree.ref(), stream, &ws);
//
// Host waits per build: make_device_upward_graph of a built_device_octree, none (the builder's
// tree is trusted: three copies on the stream); of any other tree (octree_ref), two (device_task_graph reads its counts, then
// waits for the finished graph); make_device_twig_graph, four (two small copies of its counts to
// pageable memory, each blocking, then device_task_graph's two). Branch wip-devtwig reads the
// counts in one copy and adds a rebuild-into overload (not yet run on a GPU).
// nvcc only (device_task_graph.cuh is); the kernels live in src/device_pass_graphs.cu, built only
// with CANOPY_GPU into canopy::passes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "canopy/cuda/device_buffer.hpp"
#include "canopy/device_task_graph.cuh"
#include "canopy/passes/device_octree_builder.cuh"
#include "canopy/passes/octree_ref.hpp"
#include "canopy/passes/twig_pass.hpp"

namespace canopy::trees {

/// The node-task graph of a device tree: a task per node, its children its dependencies, the
/// leaves (in the tree's Morton order) the sources.
canopy::device_task_graph make_device_upward_graph(const octree_ref& tree, cudaStream_t stream = nullptr,
                                                   canopy::device_graph_workspace* workspace = nullptr);

/// The node-task graph of a tree the GPU builder made, with no check and no host wait: the tree's
/// parent, child_count and leaves (Morton order) copied on `stream` (device_task_graph::
/// from_trusted_forest), so a build followed by this is one stream of work with the build's own
/// single host round trip. The graph equals make_device_upward_graph(built.tree.ref()) as long as
/// `built` is what device_octree_builder wrote (not modified since); ready in `stream`'s order.
canopy::device_task_graph make_device_upward_graph(const built_device_octree& built, cudaStream_t stream = nullptr);
/// The same into `graph`, reusing its device arrays (a simulation step rebuilding its tree then
/// allocates nothing); no work may still use `graph`.
void make_device_upward_graph(const built_device_octree& built, canopy::device_task_graph& graph, cudaStream_t stream = nullptr);

/// The twig decomposition built on the device: the graph, and per task what it computes.
struct device_twig_graph {
  canopy::device_task_graph graph;
  canopy::device_buffer<twig_task> tasks;  ///< graph.task_count() entries
  std::int32_t twig_count = 0;
};

/// make_twig_graph of a device tree: tasks in node order (a twig, any other internal node, and
/// every leaf whose parent is not a twig), the sources in Morton order (a fused leaf stands for
/// its twig once, at the twig's first child).
device_twig_graph make_device_twig_graph(const octree_ref& tree, cudaStream_t stream = nullptr,
                                         canopy::device_graph_workspace* workspace = nullptr);

}  // namespace canopy::trees
