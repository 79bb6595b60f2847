// SPDX-License-Identifier: Apache-2.0
// The accelerated backends behind `canopy accumulate`/`validate`. The reference traversal (double,
// serial) is run by the commands themselves; everything here runs the scheduler, in float, through
// canopy::trees::upward_runner.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "canopy/passes/upward_runner.hpp"
#include "canopy/scheduler_options.hpp"
#include "canopy/status.hpp"
#include "canopy/trees/multipole.hpp"
#include "canopy/trees/octree.hpp"

namespace canopy::tool {

struct backend_options {
  std::string backend = "auto";        ///< "cpu", "gpu" or "auto" (gpu when available, else cpu)
  canopy::scheduler_options scheduler; ///< --mode, --blocks, ... (scheduler_cli.hpp)
  int reps = 1;                        ///< timed runs after an untimed warm-up; the median is reported
  /// --tasks: node or twig (upward_runner.hpp); none = auto (trees::default_pass_tasks).
  std::optional<canopy::trees::pass_tasks> tasks;
  /// --build gpu: the gpu backend runs on a tree built on the device from the host tree's points
  /// with these options (device_octree_builder), checked node for node against the host tree first.
  std::optional<canopy::trees::build_options> gpu_build;
};

struct backend_result {
  std::vector<canopy::trees::multipole<float>> payloads;  ///< one per node, indexed like the octree
  std::string backend;                                    ///< the backend that ran ("auto" resolved)
  std::string device;                                     ///< e.g. "NVIDIA H100 80GB HBM3" or "4 CPU workers"
  double elapsed_us = 0;                                  ///< the upward pass itself (median of reps), no set-up or copies
  double min_us = 0, max_us = 0;                          ///< over the reps
  int reps = 1;
};

/// A CUDA device is present and usable, and this canopy was built with CUDA.
bool gpu_available();

/// Throws std::runtime_error("<backend> backend: <status>: <message>") when `r` failed.
void throw_if_failed(const canopy::run_result& r, const std::string& backend);

/// Runs the upward pass of `tree` on "cpu" or "gpu" ("auto" resolves to gpu when available, else
/// cpu). Throws std::exception subclasses whose what() is one clear line.
backend_result run_backend(const canopy::trees::octree& tree, const backend_options& options);

/// The octree of `points` built on the GPU (device_octree_builder) and downloaded; `gpu_ms` gets the
/// build's time (host clock, points already on the device). Throws std::runtime_error without CUDA
/// support or a device.
canopy::trees::octree build_octree_on_gpu(const std::vector<canopy::trees::point>& points,
                                          const canopy::trees::build_options& options, double* gpu_ms = nullptr);
/// A lattice spec's tree is the complete octree of the unit cube, built in closed form on the host;
/// the GPU builder builds the adaptive tree of the points' bounding cube, a different tree. Throws
/// usage_error(option, ...) for a lattice spec (checked before anything is loaded).
void require_adaptive_for_gpu_build(const std::string& spec, const std::string& option);

}  // namespace canopy::tool
