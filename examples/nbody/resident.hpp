// SPDX-License-Identifier: Apache-2.0
// The GPU-resident simulation: bodies live in device memory for the whole run and every phase of
// a step runs on one CUDA stream (resident_gpu.cu):
//
//   drift      kick v += a dt/2, drift x += v dt                          (one kernel)
//   build      trees::device_octree_builder: the octree of the new positions, bodies in Morton
//              order
//   reorder    the velocities follow their bodies through the builder's permutation (one gather)
//   graph      the upward pass's task graph from the builder's arrays (upward_runner::set_tree)
//   accumulate the upward pass: Canopy's persistent kernel (upward_runner::run_async)
//   forces     the walk's groups and cells, then the group walk (group_walk.cuh): a warp per group
//              of at most 32 bodies; or, with the FMM, canopy::fmm::gpu_evaluator built from the
//              device tree (its setup in place of graph and accumulate) and its task DAG's one run,
//              the kicks reading its fields in device memory
//   kick       kick v += a dt/2, and when asked the kinetic and potential energy sums (one kernel)
//
// Host waits inside a step: one, the builder's (it needs the node count to size the node arrays);
// the graph is copied from the builder's arrays with no wait (upward_runner::set_tree of the whole
// built_device_octree), and nothing is copied to the host except the two energy sums on a
// diagnostic step. Because of the builder's wait a step cannot be captured into a CUDA graph. step() returns once the step is enqueued; times() and energies() wait for it.
//
// Plain C++ interface, so simulation.cpp compiles with g++ whether or not the CUDA part is built.
#pragma once

#include <canopy/scheduler_options.hpp>
#include <canopy/trees/point.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tree_walk.hpp"

namespace nbody {

struct vec3 {
  float x, y, z;
};

// Stream time of each phase of the last step, ms (CUDA events between the phases). With the FMM
// (make_resident_sim's fmm_order), `graph` is the FMM's setup (the cells' geometry, interaction
// lists and task DAG built on the device, and the scheduler), `forces` its evaluation (the DAG's
// one run in the persistent kernel) and `accumulate` 0 (its upward pass is in the DAG).
struct resident_times {
  double drift = 0, build = 0, reorder = 0, graph = 0, accumulate = 0, forces = 0, kick = 0;
  double total() const { return drift + build + reorder + graph + accumulate + forces + kick; }
};

struct resident_energy {
  double kinetic = 0, potential = 0;
};

struct resident_tree_stats {
  std::int32_t depth = 0, nodes = 0, leaves = 0;
};

class resident_sim {
 public:
  virtual ~resident_sim() = default;
  virtual std::string describe() const = 0;

  // Uploads the bodies (any order), builds the first tree and computes the first forces; the bodies are
  // in the tree's Morton order from then on. Waits for the device.
  virtual void start(const std::vector<canopy::trees::point>& pos, const std::vector<vec3>& vel) = 0;
  // One kick-drift-kick step of `dt`, enqueued; with `energy`, the energy sums of its end too.
  virtual void step(float dt, bool energy) = 0;
  // Wait for the last step (or start) and return its phase times / its energy sums (the latter only
  // after a step with energy, or start). Throw std::runtime_error when the upward pass failed.
  virtual resident_times times() = 0;
  virtual resident_energy energies() = 0;
  virtual resident_tree_stats tree_stats() const = 0;

  // Copies for diagnostics (wait for the device): positions and masses in the current (Morton) order,
  // velocities, and the forces of the last walk in that order.
  virtual std::vector<canopy::trees::point> positions() = 0;
  virtual std::vector<vec3> velocities() = 0;
  virtual std::vector<body_force> forces() = 0;
  // The forces of the current tree and payloads at another opening angle (the accuracy check's theta
  // 0.5 when the run uses another); does not change the state.
  virtual std::vector<body_force> forces_at(float theta) = 0;
};

// Whether the GPU FMM evaluator is compiled for `order` (canopy::fmm::gpu_order_supported; false
// in a build without CUDA), and those orders as text ("4, 6, 8"; empty without CUDA).
bool gpu_fmm_order_supported(int order);
std::string gpu_fmm_orders();

// fmm_order 0: the Barnes-Hut walk (params: theta, eps2, quadrupole); else the FMM of that order
// (params.theta its opening parameter, params.eps2 its softening), evaluated by the level graph
// (fmm_level_graph) or the task DAG in the persistent kernel. Throws std::invalid_argument for
// an order the GPU evaluator lacks, std::runtime_error when the GPU part was not built or no
// device is usable.
std::unique_ptr<resident_sim> make_resident_sim(const canopy::scheduler_options& options, const walk_params& params,
                                                int max_leaf, int fmm_order = 0, bool fmm_level_graph = false);

}  // namespace nbody
