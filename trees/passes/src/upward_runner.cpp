// SPDX-License-Identifier: Apache-2.0
// upward_runner: the CPU engine and the forwarding; the GPU engine is upward_runner_gpu.cu.
#include "canopy/passes/upward_runner.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "canopy/cpu_scheduler.hpp"
#include "pass_kinds.hpp"
#include "runner_engine.hpp"

namespace canopy::trees {

namespace {

template <class Kind>
class cpu_engine final : public upward_runner::engine {
  using ops_type = decltype(Kind::template ops<detail::host_lanes>(std::declval<detail::pass_arrays>(), nullptr));

 public:
  cpu_engine(const octree& tree, const upward_options& options)
      : engine(pass_backend::cpu, options.tasks),
        prepared_(Kind::prepare(tree, options)),
        payloads_(static_cast<std::size_t>(tree.node_count())),
        sched_(prepared_.graph, options.scheduler),
        ops_(Kind::template ops<detail::host_lanes>(
            detail::pass_arrays{tree.points.data(), tree.first_child.data(), tree.child_count.data(),
                                tree.point_begin.data(), tree.point_count.data(), payloads_.data()},
            prepared_.data.data())) {}

  canopy::run_result run(CUstream_st*) override { return last_ = sched_.run(ops_); }
  void run_async(CUstream_st*) override { last_ = sched_.run(ops_); }  // the CPU has no stream to enqueue on
  canopy::run_result last_result() const override { return last_; }
  timed_run run_timed() override {
    const auto start = std::chrono::steady_clock::now();
    timed_run t{sched_.run(ops_), 0};
    t.elapsed_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    last_ = t.result;
    return t;
  }
  void set_mode(canopy::mode m) override {
    // The CPU scheduler takes its mode at construction; a new one costs a copy of the graph.
    if (m == sched_.options().mode) return;
    canopy::scheduler_options o = sched_.options();
    o.mode = m;
    sched_ = canopy::cpu_scheduler(prepared_.graph, o);
  }
  void poison() override {
    multipole<float> poison{};
    std::memset(&poison, 0xff, sizeof poison);
    std::fill(payloads_.begin(), payloads_.end(), poison);
  }
  std::vector<multipole<float>> download() const override { return payloads_; }
  const canopy::scheduler_options& options() const override { return sched_.options(); }
  int lanes() const override { return 1; }
  int grid() const override { return sched_.worker_count(); }
  std::string describe() const override {
    return std::to_string(sched_.worker_count()) + " CPU workers, " + std::string(to_string(tasks)) + " tasks";
  }
  std::span<const multipole<float>> host_payloads() const override { return payloads_; }

 private:
  detail::prepared_pass<typename Kind::task_data> prepared_;
  std::vector<multipole<float>> payloads_;
  canopy::cpu_scheduler sched_;
  ops_type ops_;  // views of the tree, prepared_.data and payloads_: the engine is never moved
  canopy::run_result last_;
};

}  // namespace

#if !CANOPY_PASSES_HAVE_GPU
bool gpu_pass_built() noexcept { return false; }
namespace detail {
std::unique_ptr<upward_runner::engine> make_gpu_engine(const octree&, const device_octree*, device_payloads<float>*,
                                                       const upward_options&) {
  throw std::runtime_error("gpu backend: Canopy was built without CUDA support (CANOPY_GPU=OFF)");
}
std::unique_ptr<upward_runner::engine> make_device_tree_engine(const device_octree&, device_payloads<float>&, const upward_options&,
                                                               CUstream_st*) {
  throw std::runtime_error("gpu backend: Canopy was built without CUDA support (CANOPY_GPU=OFF)");
}
}  // namespace detail
#endif

upward_runner::upward_runner(const octree& tree, const upward_options& options) {
  if (options.backend == pass_backend::gpu) {
    engine_ = detail::make_gpu_engine(tree, nullptr, nullptr, options);
    return;
  }
  engine_ = detail::with_pass_kind(options.tasks, [&](auto kind) -> std::unique_ptr<engine> {
    return std::make_unique<cpu_engine<decltype(kind)>>(tree, options);
  });
}

upward_runner::upward_runner(const octree& tree, const device_octree& device_tree, device_payloads<float>& payloads,
                             const upward_options& options) {
  if (options.backend != pass_backend::gpu)
    throw std::invalid_argument("upward_runner: device data given for a cpu pass");
  engine_ = detail::make_gpu_engine(tree, &device_tree, &payloads, options);
}

upward_runner::upward_runner(const device_octree& device_tree, device_payloads<float>& payloads, const upward_options& options,
                             CUstream_st* stream) {
  if (options.backend != pass_backend::gpu)
    throw std::invalid_argument("upward_runner: a device tree given for a cpu pass");
  engine_ = detail::make_device_tree_engine(device_tree, payloads, options, stream);
}

upward_runner::~upward_runner() = default;
upward_runner::upward_runner(upward_runner&&) noexcept = default;
upward_runner& upward_runner::operator=(upward_runner&&) noexcept = default;

canopy::run_result upward_runner::run() { return engine_->run(nullptr); }
canopy::run_result upward_runner::run(CUstream_st* stream) { return engine_->run(stream); }
timed_run upward_runner::run_timed() { return engine_->run_timed(); }
void upward_runner::run_async(CUstream_st* stream) { engine_->run_async(stream); }
canopy::run_result upward_runner::last_result() const { return engine_->last_result(); }
void upward_runner::set_tree(const device_octree& device_tree, device_payloads<float>& payloads, CUstream_st* stream) {
  engine_->set_tree(device_tree, payloads, stream);
}
void upward_runner::set_tree(const built_device_octree& built, device_payloads<float>& payloads, CUstream_st* stream) {
  engine_->set_built_tree(built, payloads, stream);
}
void upward_runner::set_mode(canopy::mode m) { engine_->set_mode(m); }
void upward_runner::poison() { engine_->poison(); }
std::vector<multipole<float>> upward_runner::download() const { return engine_->download(); }
pass_backend upward_runner::backend() const noexcept { return engine_->backend; }
pass_tasks upward_runner::tasks() const noexcept { return engine_->tasks; }
const canopy::scheduler_options& upward_runner::options() const noexcept { return engine_->options(); }
int upward_runner::lanes() const noexcept { return engine_->lanes(); }
int upward_runner::grid() const noexcept { return engine_->grid(); }
std::string upward_runner::describe() const { return engine_->describe(); }
octree_ref upward_runner::device_tree() const { return engine_->device_tree(); }
multipole<float>* upward_runner::device_payloads_data() const { return engine_->device_payloads_data(); }
std::span<const multipole<float>> upward_runner::host_payloads() const { return engine_->host_payloads(); }

}  // namespace canopy::trees
