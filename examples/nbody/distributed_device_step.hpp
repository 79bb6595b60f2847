// SPDX-License-Identifier: Apache-2.0
// The whole distributed step on the GPUs (distributed_device_step.cu, built with CUDA and NCCL):
// the same six steps as distributed_step (distributed_step.hpp), with this rank's bodies,
// velocities and forces in its GPU's memory from start to end and the data exchanged by NCCL.
// MPI carries only counts, boxes and the agreement on failures.
//
//   1-3. decomposition, migration and the local build: device_distributed_octree::build, the
//        velocities and ids carried along as the points' companions;
//   4.   the upward pass: device_distributed_octree::upward (local pass, branch payloads gathered,
//        top tree combined on the host: a few thousand nodes);
//   5.   the essential trees, for each other rank: every node's opening by that rank's domain boxes
//        (one thread a node), the nodes to send (a node is sent when every ancestor up to its
//        global leaf is opened), numbered by a scan, written with their links and their leaves'
//        bodies, exchanged by grouped ncclSend/ncclRecv, and linked below the top tree's leaves;
//   6.   the walk: the GPU's group walk (group_walk.cuh) over the top tree, this rank's subtrees
//        and the received ones.
// The integrator's kick and drift run on the device too (integrate.cuh). Host waits inside a step:
// the decomposition's (counts), one per other rank in step 5 (the sizes of its essential tree),
// and the exchange's.
//
// Plain C++ interface, so distributed_run.cpp compiles with g++.
#pragma once

#include <canopy/distributed/mpi_context.hpp>
#include <canopy/scheduler_options.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed_step.hpp"
#include "tree_walk.hpp"

namespace nbody {

class device_step {
 public:
  virtual ~device_step() = default;
  virtual std::string describe() const = 0;
  // Uploads this rank's share of the initial bodies (any order, any count).
  virtual void start(const std::vector<dist_body>& bodies) = 0;
  // Steps 1-6 for the bodies as they are now: afterwards the bodies are in this rank's local octree
  // order and forces() are theirs. Collective.
  virtual void rebuild_and_forces(const walk_params& params, dist_phase_times& times) = 0;
  // Steps 5-6 again over the same tree at other walk parameters (the accuracy check's theta 0.5).
  // Collective.
  virtual void forces_only(const walk_params& params, dist_phase_times& times) = 0;
  // Kick v += a half_dt, drift x += v dt. Enqueued.
  virtual void kick_drift(float half_dt, float dt) = 0;
  // Kick v += a half_dt; returns this rank's kinetic and potential energy sums (0.5 m phi). Waits.
  virtual void kick(float half_dt, double& kinetic, double& potential) = 0;
  // Copies for the checks (wait for the device): the bodies (work 0) and the forces of the last walk.
  virtual std::vector<dist_body> bodies() = 0;
  virtual std::vector<body_force> forces() = 0;
  virtual std::size_t body_count() const = 0;
  virtual const let_stats& last_let() const = 0;
  virtual std::int32_t top_nodes() const = 0;
  virtual std::int32_t top_leaves() const = 0;
  // Device memory in use on this rank's GPU (cudaMemGetInfo), bytes.
  virtual std::size_t device_bytes() const = 0;
  // The last rebuild_and_forces in finer parts (ms, this rank): for the debug log.
  virtual std::string last_parts() const = 0;
  // A test aid: this rank's walks throw (every rank must stop with one line).
  virtual void fail_walk(bool fail) = 0;
};

// The step on device `local_rank` (this rank's index among its host's ranks) modulo the visible
// devices. Throws std::runtime_error in a build without CUDA or NCCL, or without a usable device.
std::unique_ptr<device_step> make_device_step(const canopy::distributed::mpi_context& ctx, int local_rank, int max_leaf,
                                              const canopy::scheduler_options& scheduler);

// The PCI bus id of the GPU make_device_step would take for this rank, or "" in a build without
// CUDA or NCCL, or without a usable device: one GPU a rank (NCCL refuses two ranks on one GPU), so
// run() compares them over a host's ranks before choosing the device step.
std::string device_step_gpu(int local_rank);

}  // namespace nbody
