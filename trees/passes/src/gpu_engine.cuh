// SPDX-License-Identifier: Apache-2.0
// The GPU engine of one task kind and lane count: the tree and payloads on the device, the kind's
// task data uploaded, one gpu_scheduler over the kind's graph. Included only by the instance units
// (gpu_engine_instance.cu.in), each of which compiles one (Kind, Lanes) and its persistent kernels.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "canopy/cuda/device.hpp"
#include "canopy/cuda/event.hpp"
#include "canopy/gpu_scheduler.cuh"
#include "gpu_pass_data.cuh"

namespace canopy::trees::detail {

template <class Kind, int Lanes>
class gpu_engine final : public upward_runner::engine {
  using ops_type = decltype(Kind::template ops<Lanes>(std::declval<pass_arrays>(), nullptr));

 public:
  gpu_engine(gpu_pass_data&& data, prepared_pass<typename Kind::task_data>&& prepared,
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
    if constexpr (std::is_same_v<Kind, node_pass>) {
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
        pass_arrays{t.points, t.first_child, t.child_count, t.point_begin, t.point_count, d.payloads_->data()},
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

template <class Kind, int Lanes>
std::unique_ptr<upward_runner::engine> make_kind_engine(gpu_pass_data&& data, prepared_pass<typename Kind::task_data>&& prepared,
                                                        const upward_options& options) {
  return std::make_unique<gpu_engine<Kind, Lanes>>(std::move(data), std::move(prepared), options);
}

template <class Kind, int Lanes>
std::unique_ptr<upward_runner::engine> make_kind_engine(gpu_pass_data&& data, device_prepared_pass<typename Kind::task_data>&& prepared,
                                                        const upward_options& options, cudaStream_t stream) {
  return std::make_unique<gpu_engine<Kind, Lanes>>(std::move(data), std::move(prepared), options, stream);
}

}  // namespace canopy::trees::detail
