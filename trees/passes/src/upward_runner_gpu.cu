// upward_runner's GPU engine: the tree and payloads on the device (its own or the caller's), the
// kind's task data uploaded, one gpu_scheduler over the kind's graph. Built only with CANOPY_GPU.
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "canopy/cuda/device.hpp"
#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/event.hpp"
#include "canopy/gpu_scheduler.cuh"
#include "canopy/passes/device_octree.cuh"
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
  // Behind pointers so that tree_ and payloads_ stay valid when this moves into the engine.
  std::unique_ptr<device_octree> own_tree;
  std::unique_ptr<device_payloads<float>> own_payloads;
  const device_octree* tree_ = nullptr;
  device_payloads<float>* payloads_ = nullptr;
};

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

  canopy::run_result run(CUstream_st* stream) override { return sched_.run(ops_, stream); }
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
  std::vector<multipole<float>> download() const override { return data_.payloads_->download(); }
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
    auto prepared = Kind::prepare(tree);
    return Kind::with_lanes(lanes, [&](auto l) -> std::unique_ptr<upward_runner::engine> {
      return std::make_unique<gpu_engine<Kind, decltype(l)::value>>(std::move(data), std::move(prepared), options);
    });
  });
}

}  // namespace detail

}  // namespace canopy::trees
