// SPDX-License-Identifier: Apache-2.0
// upward_runner's GPU engine, its dispatch: the graph built on the device for each task kind, and
// the choice of the (kind, lanes) engine, whose instances are compiled in units of their own
// (gpu_engine.cuh, gpu_engine_instance.cu.in). Built only with CANOPY_GPU.
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "canopy/cuda/error.hpp"
#include "gpu_pass_data.cuh"

namespace canopy::trees {

bool gpu_pass_built() noexcept { return true; }

namespace detail {

device_prepared_pass<std::int32_t> prepare_on_device(node_pass, const octree_ref& tree, cudaStream_t stream,
                                                     canopy::device_graph_workspace& workspace, const upward_options&) {
  return {make_device_upward_graph(tree, stream, &workspace), {}};
}
device_prepared_pass<twig_task> prepare_on_device(twig_pass, const octree_ref& tree, cudaStream_t stream,
                                                  canopy::device_graph_workspace& workspace, const upward_options&) {
  device_twig_graph g = make_device_twig_graph(tree, stream, &workspace);
  return {std::move(g.graph), std::move(g.tasks)};
}
/// Bucket tasks of a device tree: not yet built by kernels. The structure arrays come to the host
/// (one wait on `stream`), the decomposition is made there and uploaded: correct, but a host round
/// trip per tree (a device build is future work, see bucket_pass.hpp).
device_prepared_pass<std::int32_t> prepare_on_device(bucket_pass, const octree_ref& tree, cudaStream_t stream,
                                                     canopy::device_graph_workspace&, const upward_options& options) {
  bucket_pass::check(options, tree.point_total);
  const auto n = static_cast<std::size_t>(tree.node_count);
  octree host;
  host.first_child.resize(n);
  host.child_count.resize(n);
  host.point_begin.resize(n);
  host.point_count.resize(n);
  for (auto [dst, src] : {std::pair{&host.first_child, tree.first_child}, std::pair{&host.child_count, tree.child_count},
                          std::pair{&host.point_begin, tree.point_begin}, std::pair{&host.point_count, tree.point_count}})
    CANOPY_CUDA_TRY(cudaMemcpyAsync(dst->data(), src, n * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
  CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
  bucket_graph bg = make_bucket_graph(host, bucket_pass::bucket_points(tree.point_total, options));
  const canopy::device_buffer<task_id> parent(bg.graph.parent()), sources(bg.graph.sources());
  return {canopy::device_task_graph::from_parents(parent.data(), bg.graph.task_count(), stream, sources.data(),
                                                  static_cast<std::int32_t>(bg.graph.sources().size())),
          canopy::device_buffer<std::int32_t>(bg.blob)};
}

std::unique_ptr<upward_runner::engine> make_gpu_engine(const octree& tree, const device_octree* device_tree,
                                                       device_payloads<float>* payloads, const upward_options& options) {
  if ((device_tree == nullptr) != (payloads == nullptr))
    throw std::invalid_argument("upward_runner: give both the device tree and the payloads, or neither");
  gpu_pass_data data(tree, device_tree, payloads);
  const int lanes = options.lanes != 0 ? options.lanes : upward_lanes(tree);
  return with_pass_kind(options.tasks, [&](auto kind) -> std::unique_ptr<upward_runner::engine> {
    using Kind = decltype(kind);
    auto prepared = Kind::prepare(tree, options);
    return Kind::with_lanes(lanes, [&](auto l) -> std::unique_ptr<upward_runner::engine> {
      return make_kind_engine<Kind, decltype(l)::value>(std::move(data), std::move(prepared), options);
    });
  });
}

std::unique_ptr<upward_runner::engine> make_device_tree_engine(const device_octree& device_tree, device_payloads<float>& payloads,
                                                               const upward_options& options, CUstream_st* stream) {
  gpu_pass_data data(device_tree, payloads);
  const int lanes = options.lanes != 0 ? options.lanes : upward_lanes(device_tree.point_total(), device_tree.leaf_count());
  return with_pass_kind(options.tasks, [&](auto kind) -> std::unique_ptr<upward_runner::engine> {
    using Kind = decltype(kind);
    canopy::device_graph_workspace workspace;
    auto prepared = prepare_on_device(Kind{}, device_tree.ref(), stream, workspace, options);
    return Kind::with_lanes(lanes, [&](auto l) -> std::unique_ptr<upward_runner::engine> {
      return make_kind_engine<Kind, decltype(l)::value>(std::move(data), std::move(prepared), options, stream);
    });
  });
}

}  // namespace detail

}  // namespace canopy::trees
