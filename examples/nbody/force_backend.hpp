// SPDX-License-Identifier: Apache-2.0
// The CPU path's upward pass and force walk (canopy::cpu_scheduler and host threads), behind an
// interface that keeps the host loop (simulation.cpp) free of the backend's details. The GPU path
// is resident.hpp: there the whole step, build included, runs on the device.
#pragma once

#include <canopy/scheduler_options.hpp>
#include <canopy/trees/multipole.hpp>
#include <canopy/trees/octree.hpp>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tree_walk.hpp"

namespace nbody {

// Milliseconds spent in each part of one force evaluation.
struct force_times {
  double setup_ms = 0;       // task graph + scheduler construction (+ GPU: tree upload, force download)
  double accumulate_ms = 0;  // the scheduler run of the upward pass (GPU: CUDA events around it)
  double forces_ms = 0;      // the tree walk (GPU: CUDA events around the kernel)
};

class force_backend {
 public:
  virtual ~force_backend() = default;
  // "cpu, 2 workers, mode continuation" / "NVIDIA H100 ..., 132 blocks x 256 threads, ..."
  virtual std::string describe() const = 0;

  // Runs the upward pass of `tree` with Canopy (leaves P2M, parents M2M), then the force walk for
  // every body in the tree's order: out[i] is the force on tree.points[i]. `out` has
  // tree.points.size() entries. Throws std::runtime_error when the scheduler run fails.
  virtual void compute(const canopy::trees::octree& tree, const walk_params& params, std::span<body_force> out,
                       force_times& times) = 0;

  // The payloads of the last compute (downloaded on the GPU), for diagnostics.
  virtual std::vector<canopy::trees::multipole<float>> last_payloads() const = 0;
};

// `threads` workers for the scheduler and the walk (0 = hardware threads).
std::unique_ptr<force_backend> make_cpu_backend(const canopy::scheduler_options& options, unsigned threads);
// The FMM of `order` (min_fmm_order..max_fmm_order, simulation.hpp) in place of the upward pass and
// the walk (fmm_cpu_backend.cpp): compute's params.theta is its opening parameter, times.setup_ms
// the geometry, lists, task DAG and scheduler, times.forces_ms the DAG's run. Throws
// std::invalid_argument for another order.
std::unique_ptr<force_backend> make_cpu_fmm_backend(const canopy::scheduler_options& options, unsigned threads,
                                                    int order);

// Whether the GPU part (resident_gpu.cu) was built (CANOPY_GPU) and a CUDA device is usable.
bool gpu_backend_built();
bool gpu_backend_usable();

// Runs fn(begin, end) over [0, n) in chunks on `threads` std::threads (0 = hardware threads),
// chunks handed out dynamically so uneven work balances.
void parallel_for(std::size_t n, unsigned threads, std::size_t chunk,
                  const std::function<void(std::size_t, std::size_t)>& fn);

}  // namespace nbody
