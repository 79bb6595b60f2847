// The scheduler backends behind `canopy accumulate` and `canopy validate`: the upward pass through
// trees::upward_runner on either backend, timed with the backend's clock.
#include "backends.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "canopy/cuda/device.hpp"
#include "common/stats.hpp"

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
  ct::upward_runner pass(tree, o);
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

}  // namespace canopy::tool
