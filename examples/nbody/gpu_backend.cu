// The GPU backend: the octree is uploaded (trees::device_octree), the upward pass runs in Canopy's
// persistent kernel (canopy::gpu_scheduler with trees::upward_ops<float>, exactly what a user
// embedding Canopy writes), then one CUDA thread per body walks the tree (walk_one, the same
// function the CPU backend calls) and the forces are copied back for the host integrator.
//
// The octree itself is still built on the host every step (simulation.cpp); a GPU builder that
// keeps bodies resident on the device is future work, and would remove the upload and download
// this backend pays per step (the "setup" column).
#include <cuda_runtime.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include <canopy/gpu_scheduler.cuh>
#include <canopy/trees/device_octree.cuh>
#include <canopy/trees/upward_pass.hpp>

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

class event_pair {
 public:
  event_pair() {
    CANOPY_TREES_CUDA_CHECK(cudaEventCreate(&start_));
    CANOPY_TREES_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~event_pair() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  event_pair(const event_pair&) = delete;
  event_pair& operator=(const event_pair&) = delete;
  void start() { CANOPY_TREES_CUDA_CHECK(cudaEventRecord(start_)); }
  void stop() { CANOPY_TREES_CUDA_CHECK(cudaEventRecord(stop_)); }
  double ms() const {
    CANOPY_TREES_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    CANOPY_TREES_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

class gpu_backend final : public force_backend {
 public:
  explicit gpu_backend(const canopy::scheduler_options& options) : options_(options) {
    if (!canopy::gpu_available()) throw std::runtime_error("gpu backend: no CUDA device is available (use --backend cpu)");
    int device = 0;
    CANOPY_TREES_CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CANOPY_TREES_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    device_name_ = prop.name;
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
    // A new tree every step: upload it, and a new scheduler for its task graph.
    dtree_ = ct::device_octree(tree);
    payloads_ = ct::device_payloads<float>(tree.node_count());
    if (forces_.size() < out.size()) forces_ = ct::detail::device_array<body_force>(out.size());
    canopy::gpu_scheduler sched(ct::make_upward_graph(tree), options_);
    times.setup_ms = ms_since(t0);

    const ct::octree_ref t = dtree_.ref();
    const ct::upward_ops<float> ops{t.points, t.first_child, t.child_count, t.point_begin, t.point_count, payloads_.data()};
    event_pair acc;
    acc.start();
    const canopy::run_result r = sched.run(ops);
    acc.stop();
    times.accumulate_ms = acc.ms();
    grid_ = sched.last_grid();
    if (!r.ok())
      throw std::runtime_error("gpu backend: upward pass: " + std::string(canopy::to_string(r.code)) + ": " + r.message);

    const walk_tree view{t.points, t.first_child, t.child_count, t.point_begin, t.point_count, payloads_.data()};
    event_pair walk;
    walk.start();
    if (n > 0) {
      walk_kernel<<<static_cast<unsigned>((n + walk_block - 1) / walk_block), walk_block>>>(view, n, params, forces_.data());
      CANOPY_TREES_CUDA_CHECK(cudaGetLastError());
    }
    walk.stop();
    times.forces_ms = walk.ms();

    t0 = std::chrono::steady_clock::now();
    if (n > 0)
      CANOPY_TREES_CUDA_CHECK(cudaMemcpy(out.data(), forces_.data(), out.size_bytes(), cudaMemcpyDeviceToHost));
    times.setup_ms += ms_since(t0);
  }

  std::vector<ct::multipole<float>> last_payloads() const override { return payloads_.download(); }

 private:
  static constexpr int walk_block = 128;
  canopy::scheduler_options options_;
  std::string device_name_;
  int grid_ = 0;
  ct::device_octree dtree_;
  ct::device_payloads<float> payloads_;
  ct::detail::device_array<body_force> forces_;
};

}  // namespace

bool gpu_backend_built() { return true; }
bool gpu_backend_usable() { return canopy::gpu_available(); }

std::unique_ptr<force_backend> make_gpu_backend(const canopy::scheduler_options& options) {
  return std::make_unique<gpu_backend>(options);
}

}  // namespace nbody
