// SPDX-License-Identifier: Apache-2.0
// The GPU backend: the octree is uploaded and the upward pass runs in Canopy's persistent kernel
// (trees::upward_runner: node tasks, trees::upward_ops<float>), then one CUDA thread per body walks
// the tree through the runner's device view (walk_one, the same function the CPU backend calls)
// and the forces are copied back for the host integrator.
//
// The octree itself is still built on the host every step (simulation.cpp); a GPU builder that
// keeps bodies resident on the device is future work, and would remove the upload and download
// this backend pays per step (the "setup" column).
#include <cuda_runtime.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include <canopy/cuda/device.hpp>
#include <canopy/cuda/device_buffer.hpp>
#include <canopy/cuda/error.hpp>
#include <canopy/cuda/event.hpp>
#include <canopy/passes/upward_runner.hpp>

#include "force_backend.hpp"

namespace nbody {

namespace {

namespace ct = canopy::trees;

// One thread per body; bodies are in Morton order, so the threads of a warp are neighbours in space
// and open nearly the same nodes (little divergence, shared cache lines).
__global__ void __launch_bounds__(128) walk_kernel(walk_tree t, std::int32_t n, walk_params p, body_force* out) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const ct::point b = t.points[i];
  out[i] = walk_one(t, i, b.x, b.y, b.z, p);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

class gpu_backend final : public force_backend {
 public:
  explicit gpu_backend(const canopy::scheduler_options& options) : options_(options) {
    if (!canopy::gpu_available()) throw std::runtime_error("gpu backend: no CUDA device is available (use --backend cpu)");
    device_name_ = canopy::gpu_name();
  }

  std::string describe() const override {
    return "gpu, " + device_name_ + ", upward pass " +
           (grid_ > 0 ? std::to_string(grid_) + " blocks x " : std::string()) +
           std::to_string(options_.threads_per_block) + " threads, mode " + std::string(canopy::to_string(options_.mode)) +
           "; walk " + std::to_string(walk_block) + " threads per block, one per body";
  }

  void compute(const ct::octree& tree, const walk_params& params, std::span<body_force> out,
               force_times& times) override {
    if (out.size() != tree.points.size()) throw std::invalid_argument("gpu backend: output size differs from the body count");
    const auto n = static_cast<std::int32_t>(tree.points.size());
    auto t0 = std::chrono::steady_clock::now();
    // A new tree every step: upload it, and a new scheduler for its task graph. Two lanes per
    // node, as this example always ran (upward_ops<float>'s default).
    pass_.reset();
    ct::upward_options o{ct::pass_backend::gpu, ct::pass_tasks::node, options_};
    o.lanes = 2;
    pass_.emplace(tree, o);
    if (forces_.size() < out.size()) forces_ = canopy::device_buffer<body_force>(out.size());
    times.setup_ms = ms_since(t0);

    const ct::timed_run r = pass_->run_timed();
    times.accumulate_ms = r.elapsed_us / 1e3;
    grid_ = pass_->grid();
    if (!r.result.ok())
      throw std::runtime_error("gpu backend: upward pass: " + std::string(canopy::to_string(r.result.code)) + ": " +
                               r.result.message);

    const ct::octree_ref t = pass_->device_tree();
    const walk_tree view{t.points, t.first_child, t.child_count, t.point_begin, t.point_count,
                         pass_->device_payloads_data()};
    canopy::cuda_event walk_start, walk_stop;
    walk_start.record();
    if (n > 0) {
      walk_kernel<<<static_cast<unsigned>((n + walk_block - 1) / walk_block), walk_block>>>(view, n, params, forces_.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
    walk_stop.record();
    times.forces_ms = canopy::elapsed_ms(walk_start, walk_stop);

    t0 = std::chrono::steady_clock::now();
    if (n > 0)
      CANOPY_CUDA_TRY(cudaMemcpy(out.data(), forces_.data(), out.size_bytes(), cudaMemcpyDeviceToHost));
    times.setup_ms += ms_since(t0);
  }

  std::vector<ct::multipole<float>> last_payloads() const override {
    return pass_ ? pass_->download() : std::vector<ct::multipole<float>>{};
  }

 private:
  static constexpr int walk_block = 128;
  canopy::scheduler_options options_;
  std::string device_name_;
  int grid_ = 0;
  std::optional<ct::upward_runner> pass_;  // the last step's tree, payloads and scheduler
  canopy::device_buffer<body_force> forces_;
};

}  // namespace

bool gpu_backend_built() { return true; }
bool gpu_backend_usable() { return canopy::gpu_available(); }

std::unique_ptr<force_backend> make_gpu_backend(const canopy::scheduler_options& options) {
  return std::make_unique<gpu_backend>(options);
}

}  // namespace nbody
