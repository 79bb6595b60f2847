// The accelerated backends behind `canopy accumulate`/`validate`. The reference traversal (double,
// serial) is run by the commands themselves; everything here runs the scheduler, in float.
#pragma once

#include <string>
#include <vector>

#include "canopy/trees/multipole.hpp"
#include "canopy/trees/octree.hpp"

namespace canopy::tool {

struct backend_options {
  std::string backend = "auto";        ///< "cpu", "gpu" or "auto" (gpu when available, else cpu)
  std::string mode = "continuation";   ///< a canopy::mode name (see canopy/mode.hpp)
  int blocks = 0;                      ///< 0 = as many as can be co-resident (gpu) / hardware threads (cpu)
  int threads_per_block = 128;
  int queue_capacity = 0;              ///< global queue capacity; 0 = the task count
  std::string push_policy = "round-robin";
  double deadline_ms = 10000;
  int reps = 1;                        ///< timed runs after an untimed warm-up; the median is reported
  std::string tasks = "auto";          ///< "twig" (trees/twig_pass.hpp), "node" (a task per node), or "auto": twig on the GPU, node on the CPU
};

struct backend_result {
  std::vector<canopy::trees::multipole<float>> payloads;  ///< one per node, indexed like the octree
  std::string backend;                                    ///< the backend that ran ("auto" resolved)
  std::string device;                                     ///< e.g. "NVIDIA H100 80GB HBM3" or "4 CPU workers"
  double elapsed_us = 0;                                  ///< the upward pass itself (median of reps), no set-up or copies
  double min_us = 0, max_us = 0;                          ///< over the reps
  int reps = 1;
};

/// Median, min and max of `samples` (not empty) into r.
void summarise_times(std::vector<double> samples, backend_result& r);

/// A CUDA device is present and usable.
bool gpu_available();

/// Runs the upward pass of `tree` on "cpu" or "gpu" ("auto" resolves to gpu when available, else
/// cpu). Throws std::exception subclasses whose what() is one clear line.
backend_result run_backend(const canopy::trees::octree& tree, const backend_options& options);

}  // namespace canopy::tool
