// SPDX-License-Identifier: Apache-2.0
// The N-body force evaluation across MPI ranks (CPU path), on canopy::distributed:
//
//   1. decompose: the global cube and the global coarse tree over every rank's bodies, the ranks'
//      Morton ranges cut by body count or by the previous step's interactions per body;
//   2. migrate: every body (position, velocity, id, work) to the rank owning its key, all-to-all-v;
//   3. build: the local octree over the global cube (so its cells are the global octree's), the
//      bodies in its order;
//   4. upward: the local pass (canopy::cpu_scheduler), then the branch payloads all-gathered and
//      the top tree completed on every rank (distributed_upward_pass);
//   5. essential tree: for every other rank, this rank walks its own subtrees against that rank's
//      domain (the boxes of bodies of the largest top-tree cells it owns whole) with the walk's
//      opening criterion applied to each box's nearest point, and sends the pruned subtrees: nodes
//      that every box accepts as multipoles, the bodies of leaves that must be opened, the opened
//      nodes as links (all-to-all-v);
//   6. walk: each body walks the global octree as this rank sees it: the top tree, its own subtrees
//      below its global leaves, the received pruned subtrees below the others'. A node a body does
//      not accept is never accepted by a box around it, so the sender opened it: the walk takes
//      exactly the decisions it would take on the whole global octree.
//
// With one rank the tree walked is the single-process tree and the forces are those of the
// single-process CPU path (up to the rounding of the top tree's merges).
#pragma once

#include <canopy/distributed/distributed_octree.hpp>
#include <canopy/distributed/exchange.hpp>
#include <canopy/distributed/mpi_context.hpp>
#include <canopy/scheduler_options.hpp>
#include <canopy/trees/multipole.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/point.hpp>

#include <cstdint>
#include <vector>

#include "distributed_walk_gpu.hpp"
#include "resident.hpp"
#include "tree_walk.hpp"

namespace nbody {

// A body as it migrates between ranks: what the integrator and the balance need follow it.
struct dist_body {
  canopy::trees::point p;
  vec3 v;
  float work;        // interactions of its last walk (0 before the first)
  std::uint64_t id;  // its index in the initial conditions (the checks match bodies by it)
};

// How the ranks' ranges are cut: by body count, or by the previous step's interactions.
enum class balance_by { count, work };

// Wall-clock milliseconds of each phase on this rank.
struct dist_phase_times {
  double wait = 0;       // for the slowest rank at the step's start (a barrier: the imbalance of the last step)
  double decompose = 0;  // global cube, Morton sort, global tree, balance
  double migrate = 0;    // the all-to-all-v of the bodies and their sort
  double build = 0;      // the local octree and the branch locations
  double upward = 0;     // local upward pass and branch payloads
  double top = 0;        // the all-gather of the branch payloads and the top tree
  double let = 0;        // the essential trees: pruned walks, all-to-all-v, assembly
  double walk = 0;       // the force walk
};

// Sizes of the last essential-tree exchange, this rank's side.
struct let_stats {
  std::uint64_t nodes_sent = 0, bodies_sent = 0, nodes_received = 0, bodies_received = 0;
};

class distributed_step {
 public:
  distributed_step(const canopy::distributed::mpi_context& ctx, canopy::distributed::exchange& ex, int max_leaf,
                   balance_by balance, const canopy::scheduler_options& scheduler, unsigned threads);

  // Steps 1-4: `bodies` (this rank's, any order) leave as this rank's bodies in the local
  // octree's order. Collective.
  void rebuild(std::vector<dist_body>& bodies, dist_phase_times& times);

  // Steps 5-6 for the bodies of the last rebuild (unchanged since): out[i] is the force on
  // bodies[i]; with `record_work` each body's interactions are stored in bodies[i].work.
  // Collective.
  void forces(std::vector<dist_body>& bodies, const walk_params& params, std::vector<body_force>& out,
              dist_phase_times& times, bool record_work);

  // The walk on this rank's GPU instead of host threads (the rest of the step stays on the host;
  // the walk then records no work, so --balance work cuts by count).
  void set_gpu_walker(gpu_walker* walker) { walker_ = walker; }
  // A test aid: this rank's walks throw (the failure test: every rank must stop with one line).
  void fail_walk(bool fail) { fail_walk_ = fail; }

  const canopy::distributed::distributed_octree& tree() const { return tree_; }
  const let_stats& last_let() const { return let_; }
  std::int64_t walk_nodes() const { return static_cast<std::int64_t>(first_child_.size()); }

 private:
  const canopy::distributed::mpi_context& ctx_;
  canopy::distributed::exchange& ex_;
  int max_leaf_;
  balance_by balance_;
  canopy::scheduler_options scheduler_;
  unsigned threads_;
  canopy::distributed::distributed_octree tree_;
  canopy::distributed::distributed_moments moments_;
  let_stats let_;
  gpu_walker* walker_ = nullptr;
  bool fail_walk_ = false;
  std::vector<std::uint64_t> groups_;  // the GPU walk's groups of this rank's bodies
  // The walk's tree (walk_tree views these): top nodes, then local nodes, then received ones.
  std::vector<std::int32_t> first_child_, child_count_, point_begin_, point_count_;
  std::vector<canopy::trees::multipole<float>> payload_;
  std::vector<canopy::trees::point> points_;  // this rank's bodies, then the received ones
};

}  // namespace nbody
