// SPDX-License-Identifier: Apache-2.0
// upward_runner's GPU engine: the tree and payloads on the device (its own or the caller's), the
// kind's task data uploaded, one gpu_scheduler over the kind's graph. Built only with CANOPY_GPU.
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "canopy/cuda/device.hpp"
#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/event.hpp"
#include "canopy/gpu_scheduler.cuh"
#include "canopy/passes/device_octree.cuh"
#include "canopy/passes/device_pass_graphs.cuh"
#include "pass_kinds.hpp"
#include "runner_engine.hpp"

namespace canopy::trees {

bool gpu_pass_built() noexcept { return true; }

namespace {

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

device_prepared_pass<std::int32_t> prepare_on_device(detail::node_pass, const octree_ref& tree, cudaStream_t stream,
                                                     canopy::device_graph_workspace& workspace, const upward_options&) {
  return {make_device_upward_graph(tree, stream, &workspace), {}};
}
device_prepared_pass<twig_task> prepare_on_device(detail::twig_pass, const octree_ref& tree, cudaStream_t stream,
                                                  canopy::device_graph_workspace& workspace, const upward_options&) {
  device_twig_graph g = make_device_twig_graph(tree, stream, &workspace);
  return {std::move(g.graph), std::move(g.tasks)};
}
/// Bucket tasks of a device tree: not yet built by kernels. The structure arrays come to the host
/// (one wait on `stream`), the decomposition is made there and uploaded: correct, but a host round
/// trip per tree (a device build is future work, see bucket_pass.hpp).
device_prepared_pass<std::int32_t> prepare_on_device(detail::bucket_pass, const octree_ref& tree, cudaStream_t stream,
                                                     canopy::device_graph_workspace&, const upward_options& options) {
  detail::bucket_pass::check(options, tree.point_total);
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
  bucket_graph bg = make_bucket_graph(host, detail::bucket_pass::bucket_points(tree.point_total, options));
  const canopy::device_buffer<task_id> parent(bg.graph.parent()), sources(bg.graph.sources());
  return {canopy::device_task_graph::from_parents(parent.data(), bg.graph.task_count(), stream, sources.data(),
                                                  static_cast<std::int32_t>(bg.graph.sources().size())),
          canopy::device_buffer<std::int32_t>(bg.blob)};
}

template <class Kind, int Lanes>
class gpu_engine final : public upward_runner::engine {
  using ops_type = decltype(Kind::template ops<Lanes>(std::declval<detail::pass_arrays>(), nullptr));

 public:
  gpu_engine(gpu_pass_data&& data, detail::prepared_pass<typename Kind::task_data>&& prepared,
             const upward_options& options)
      : engine(pass_backend::gpu, options.tasks),
        data_(std::move(data)),
        task_data_(prepared.data),
        sched_(prepared.graph, options.scheduler),
        ops_(make_ops(data_, task_data_)) {}  // device_buffer's upload has landed when it returns

  /// Over a device tree: the graph and task data built on the device, no host copy.
  gpu_engine(gpu_pass_data&& data, device_prepared_pass<typename Kind::task_data>&& prepared, const upward_options& options,
             cudaStream_t stream)
      : engine(pass_backend::gpu, options.tasks),
        data_(std::move(data)),
        task_data_(std::move(prepared.data)),
        sched_(prepared.graph, options.scheduler, stream),
        ops_(make_ops(data_, task_data_)),
        options_(options),
        device_tree_(true) {}

  canopy::run_result run(CUstream_st* stream) override { return sched_.run(ops_, stream); }
  void run_async(CUstream_st* stream) override { sched_.run_async(ops_, stream); }
  canopy::run_result last_result() const override { return sched_.last_result(); }
  void set_tree(const device_octree& tree, device_payloads<float>& payloads, CUstream_st* stream) override {
    if (!device_tree_) upward_runner::engine::set_tree(tree, payloads, stream);  // throws: a host tree's runner
    gpu_pass_data data(tree, payloads);
    auto prepared = prepare_on_device(Kind{}, tree.ref(), stream, workspace_, options_);
    sched_.set_graph(prepared.graph, stream);
    task_data_ = std::move(prepared.data);  // the old buffer's cudaFree waits for runs still reading it
    data_ = std::move(data);
    ops_ = make_ops(data_, task_data_);
  }
  void set_built_tree(const built_device_octree& built, device_payloads<float>& payloads, CUstream_st* stream) override {
    if constexpr (std::is_same_v<Kind, detail::node_pass>) {
      if (!device_tree_) upward_runner::engine::set_tree(built.tree, payloads, stream);  // throws: a host tree's runner
      gpu_pass_data data(built.tree, payloads);
      make_device_upward_graph(built, trusted_graph_, stream);  // no host wait: the builder's arrays, copied
      sched_.set_graph(trusted_graph_, stream);                   // waits only when its queues must grow
      data_ = std::move(data);
      ops_ = make_ops(data_, task_data_);
    } else {
      set_tree(built.tree, payloads, stream);
    }
  }
  timed_run run_timed() override {
    start_.record();
    timed_run t{sched_.run(ops_), 0};
    stop_.record();
    t.elapsed_us = 1000.0 * static_cast<double>(elapsed_ms(start_, stop_));
    return t;
  }
  void set_mode(canopy::mode m) override { sched_.set_mode(m); }
  void poison() override {
    data_.payloads_->fill_bytes(0xff);
    CANOPY_CUDA_TRY(cudaDeviceSynchronize());
  }
  std::vector<multipole<float>> download() const override {
    std::vector<multipole<float>> v = data_.payloads_->download();
    v.resize(static_cast<std::size_t>(data_.tree_->node_count()));  // a device tree's payloads may be longer
    return v;
  }
  const canopy::scheduler_options& options() const override { return sched_.options(); }
  int lanes() const override { return ops_type::group_size; }
  int grid() const override { return sched_.last_grid(); }
  std::string describe() const override {
    return gpu_name() + ", " + std::to_string(sched_.last_grid()) + " blocks x " +
           std::to_string(sched_.options().threads_per_block) + " threads, " + std::string(to_string(tasks)) +
           " tasks of " + std::to_string(ops_type::group_size) + " lanes, mode " +
           std::string(canopy::to_string(sched_.options().mode));
  }
  octree_ref device_tree() const override { return data_.tree_->ref(); }
  multipole<float>* device_payloads_data() const override { return data_.payloads_->data(); }

 private:
  static ops_type make_ops(const gpu_pass_data& d, const canopy::device_buffer<typename Kind::task_data>& task_data) {
    const octree_ref t = d.tree_->ref();
    return Kind::template ops<Lanes>(
        detail::pass_arrays{t.points, t.first_child, t.child_count, t.point_begin, t.point_count, d.payloads_->data()},
        task_data.data());
  }

  gpu_pass_data data_;
  canopy::device_buffer<typename Kind::task_data> task_data_;
  canopy::gpu_scheduler sched_;
  ops_type ops_;
  canopy::cuda_event start_, stop_;
  upward_options options_;                  // set_tree's graph builds use it
  bool device_tree_ = false;                 // made from a device tree: set_tree allowed
  canopy::device_graph_workspace workspace_;  // the graph builds' scratch, kept between set_tree calls
  canopy::device_task_graph trusted_graph_;  // set_tree(built_device_octree): the graph, its arrays reused
};

}  // namespace

namespace detail {

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
      return std::make_unique<gpu_engine<Kind, decltype(l)::value>>(std::move(data), std::move(prepared), options);
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
      return std::make_unique<gpu_engine<Kind, decltype(l)::value>>(std::move(data), std::move(prepared), options, stream);
    });
  });
}

}  // namespace detail

}  // namespace canopy::trees
