// SPDX-License-Identifier: Apache-2.0
// The scheduler backends behind `canopy accumulate` and `canopy validate`: the upward pass through
// trees::upward_runner on either backend, timed with the backend's clock.
#include "backends.hpp"
#include "common.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include <algorithm>
#include <chrono>

#include "canopy/cuda/device.hpp"
#include "common/stats.hpp"
#if CANOPY_HAVE_GPU
#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/error.hpp"
#include "canopy/passes/device_octree.cuh"
#include "canopy/passes/device_octree_builder.cuh"
#endif

namespace canopy::tool {

namespace ct = canopy::trees;

bool gpu_available() { return ct::gpu_pass_built() && canopy::gpu_available(); }

void throw_if_failed(const canopy::run_result& r, const std::string& backend) {
  if (!r.ok()) throw std::runtime_error(backend + " backend: " + std::string(canopy::to_string(r.code)) + ": " + r.message);
}

backend_result run_backend(const ct::octree& tree, const backend_options& options) {
  std::string backend = options.backend;
  if (backend == "auto") backend = gpu_available() ? "gpu" : "cpu";
  const auto b = ct::parse_pass_backend(backend);
  if (!b) throw std::invalid_argument("unknown backend '" + options.backend + "' (reference, cpu, gpu, auto)");
  const bool gpu = *b == ct::pass_backend::gpu;
  if (gpu && !ct::gpu_pass_built())
    throw std::runtime_error("gpu backend: this canopy was built without CUDA support (CANOPY_GPU=OFF)");
  if (gpu && !canopy::gpu_available())
    throw std::runtime_error("gpu backend: no CUDA device is available (use --backend cpu)");

  const ct::upward_options o{*b, options.tasks.value_or(ct::default_pass_tasks(*b)), options.scheduler};
  if (options.gpu_build && !gpu) throw std::invalid_argument("--build gpu needs --backend gpu");
#if CANOPY_HAVE_GPU
  // --build gpu: the tree the pass runs on exists only on the device (no host copy is uploaded);
  // it must be the host's tree node for node, or the payloads could not be compared.
  std::optional<canopy::device_buffer<ct::point>> d_points;
  ct::device_octree_builder builder;
  ct::built_device_octree built;
  std::optional<ct::device_payloads<float>> d_payloads;
  if (options.gpu_build) {
    d_points.emplace(tree.points);
    builder.build_into(d_points->data(), tree.points.size(), *options.gpu_build, built);
    if (const std::string d = ct::structure_difference(built.download(), tree); !d.empty())
      throw std::runtime_error("gpu build: the tree built on the GPU differs from the host's: " + d);
    d_payloads.emplace(built.tree.node_count());
  }
  ct::upward_runner pass = options.gpu_build ? ct::upward_runner(built.tree, *d_payloads, o) : ct::upward_runner(tree, o);
#else
  if (options.gpu_build) throw std::runtime_error("gpu build: this canopy was built without CUDA support (CANOPY_GPU=OFF)");
  ct::upward_runner pass(tree, o);
#endif
  // GPU: one untimed run first, so that module load, first-touch of the tree and the occupancy
  // query stay out of the reported time, which is then one warm launch plus synchronisation.
  if (gpu) throw_if_failed(pass.run(), backend);
  std::vector<double> samples;
  for (int i = 0; i < options.reps; ++i) {
    const ct::timed_run t = pass.run_timed();
    samples.push_back(t.elapsed_us);
    throw_if_failed(t.result, backend);
  }
  if (gpu) {
    // The payloads checked come from one more run into poisoned payloads, so a run that skipped
    // nodes cannot pass on an earlier run's results.
    pass.poison();
    throw_if_failed(pass.run(), backend);
  }
  backend_result out;
  out.payloads = pass.download();
  out.backend = backend;
  out.device = pass.describe();
  const auto s = canopy::bench::summarize(std::move(samples));
  out.elapsed_us = s.median;
  out.min_us = s.min;
  out.max_us = s.max;
  out.reps = static_cast<int>(s.count);
  return out;
}

void require_adaptive_for_gpu_build(const std::string& spec, const std::string& option) {
  if (spec.rfind("gen:lattice", 0) == 0)
    throw usage_error(option, "a lattice spec builds the complete octree of the unit cube in closed form on the host; the "
                              "GPU builder builds the adaptive octree of a point set: give a point file or "
                              "gen:uniform/plummer/clusters");
}

ct::octree build_octree_on_gpu(const std::vector<ct::point>& points, const ct::build_options& options, double* gpu_ms) {
#if CANOPY_HAVE_GPU
  if (!gpu_available()) throw std::runtime_error("gpu build: no CUDA device is available (use --on host)");
  const canopy::device_buffer<ct::point> d_points(points);
  ct::device_octree_builder builder;
  ct::built_device_octree built;
  builder.build_into(d_points.data(), points.size(), options, built);  // warm: CUB's and the workspace's first allocations
  const auto t0 = std::chrono::steady_clock::now();
  builder.build_into(d_points.data(), points.size(), options, built);
  CANOPY_CUDA_TRY(cudaDeviceSynchronize());
  if (gpu_ms != nullptr) *gpu_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return built.download();
#else
  (void)points;
  (void)options;
  (void)gpu_ms;
  throw std::runtime_error("gpu build: this canopy was built without CUDA support (CANOPY_GPU=OFF)");
#endif
}

}  // namespace canopy::tool
