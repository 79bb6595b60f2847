// SPDX-License-Identifier: Apache-2.0
// What the GPU engine's dispatch (upward_runner_gpu.cu) and its instances (gpu_engine.cuh, one unit
// per task kind and lane count) share: the device data a pass runs on, the graph built on the
// device, and the declarations of the per-instance factories. The engine's persistent kernels
// (one per scheduler mode) are compiled only in the instance units, so the eight (kind, lanes)
// engines compile in parallel and a change to the dispatch recompiles none of them.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "canopy/cuda/device_buffer.hpp"
#include "canopy/device_task_graph.cuh"
#include "canopy/passes/device_octree.cuh"
#include "canopy/passes/device_pass_graphs.cuh"
#include "pass_kinds.hpp"
#include "runner_engine.hpp"

namespace canopy::trees::detail {

/// The device tree and payloads a GPU engine runs on: its own, or borrowed from the caller.
struct gpu_pass_data {
  gpu_pass_data(const octree& tree, const device_octree* borrowed_tree, device_payloads<float>* borrowed_payloads) {
    if (borrowed_tree == nullptr) {
      own_tree = std::make_unique<device_octree>(tree);
      own_payloads = std::make_unique<device_payloads<float>>(own_tree->node_count());
    }
    tree_ = borrowed_tree != nullptr ? borrowed_tree : own_tree.get();
    payloads_ = borrowed_payloads != nullptr ? borrowed_payloads : own_payloads.get();
    if (payloads_->size() != tree_->node_count())
      throw std::invalid_argument("upward_runner: " + std::to_string(payloads_->size()) + " payloads for " +
                                  std::to_string(tree_->node_count()) + " nodes");
  }
  /// A tree that exists only on the device; the payloads may be longer (a simulation keeps room).
  gpu_pass_data(const device_octree& tree, device_payloads<float>& payloads) : tree_(&tree), payloads_(&payloads) {
    if (payloads.size() < tree.node_count())
      throw std::invalid_argument("upward_runner: " + std::to_string(payloads.size()) + " payloads for " +
                                  std::to_string(tree.node_count()) + " nodes");
  }
  // Behind pointers so that tree_ and payloads_ stay valid when this moves into the engine.
  std::unique_ptr<device_octree> own_tree;
  std::unique_ptr<device_payloads<float>> own_payloads;
  const device_octree* tree_ = nullptr;
  device_payloads<float>* payloads_ = nullptr;
};

/// A kind's graph and task data built on the device from a device tree (device_pass_graphs.cuh).
template <class TaskData>
struct device_prepared_pass {
  canopy::device_task_graph graph;
  canopy::device_buffer<TaskData> data;  ///< per task (none for node tasks)
};

/// The kind's graph and task data built by kernels from a device tree (upward_runner_gpu.cu).
device_prepared_pass<std::int32_t> prepare_on_device(node_pass, const octree_ref& tree, cudaStream_t stream,
                                                     canopy::device_graph_workspace& workspace, const upward_options&);
device_prepared_pass<twig_task> prepare_on_device(twig_pass, const octree_ref& tree, cudaStream_t stream,
                                                  canopy::device_graph_workspace& workspace, const upward_options&);
device_prepared_pass<std::int32_t> prepare_on_device(bucket_pass, const octree_ref& tree, cudaStream_t stream,
                                                     canopy::device_graph_workspace&, const upward_options& options);

/// The engine of one task kind and lane count over a host tree's graph (defined in gpu_engine.cuh,
/// instantiated once per (Kind, Lanes) by the units CMake generates from gpu_engine_instance.cu.in).
template <class Kind, int Lanes>
std::unique_ptr<upward_runner::engine> make_kind_engine(gpu_pass_data&& data, prepared_pass<typename Kind::task_data>&& prepared,
                                                        const upward_options& options);
/// The same over a graph built on the device.
template <class Kind, int Lanes>
std::unique_ptr<upward_runner::engine> make_kind_engine(gpu_pass_data&& data, device_prepared_pass<typename Kind::task_data>&& prepared,
                                                        const upward_options& options, cudaStream_t stream);

}  // namespace canopy::trees::detail
