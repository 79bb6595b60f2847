// SPDX-License-Identifier: Apache-2.0
// The octree of all ranks' points, held in parts, and its upward pass.
//
//   canopy::distributed::mpi_context ctx(MPI_COMM_WORLD);
//   canopy::distributed::mpi_exchange ex(MPI_COMM_WORLD);
//   auto tree = canopy::distributed::build_distributed_octree(ctx, ex, my_points, {});
//   auto moments = canopy::distributed::distributed_upward_pass(ctx, ex, tree, pass_options);
//   // moments.top: every node of the global tree, on every rank; moments.local: this rank's subtrees
//
// Each rank builds the octree of its own points (the existing builder) over the global cube, so
// its cells and Morton codes are those of the octree of all points. Below a global leaf that the
// rank owns, its tree is exactly that octree's subtree (the rank holds all the cell's points);
// above, its nodes hold only its own points and are not nodes of the global octree. The upward
// pass runs locally (upward_runner, CPU or GPU backend), the payloads of the global leaves (the
// branch nodes) are all-gathered, and every rank combines the global tree above them.
#pragma once

#include <canopy/distributed/branch_payload.hpp>
#include <canopy/distributed/exchange.hpp>
#include <canopy/distributed/global_tree.hpp>
#include <canopy/distributed/mpi_context.hpp>
#include <canopy/passes/upward_runner.hpp>
#include <canopy/trees/multipole.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/point.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace canopy::distributed {

struct distributed_octree {
  global_tree top;       // the global coarse tree and the ranks' ranges (same on every rank)
  trees::octree local;   // this rank's points (after migration) over top.cube
  // Per global leaf this rank owns (top.leaves[top.leaf_begin[rank] + i]): where it lies in
  // `local` (branch_payload.hpp). Its node, or, when a local leaf above the cell holds it with this
  // rank's other points (the cell then holds at most max_leaf points and is a leaf of the global
  // octree), that leaf's points of the cell.
  std::vector<branch_location> branches;
};

// Wall-clock seconds of each phase on this rank (bench and logs; min/max over ranks by the caller).
// The upward pass in four: `pass_graph`, the runner's task graph for this step's tree (made, or
// set_tree; on the GPU with twig tasks that is kernels and host waits of its own); `pass`, the
// pass alone, launched and complete on this rank; `pass_device`, the same pass in GPU stream time
// (CUDA events around its launch; 0 on the CPU); `pass_wait`, the agreement after it, i.e. the
// wait for the slowest rank's pass (load imbalance). The pass of a step is pass_graph + pass.
struct phase_times {
  double extent = 0, sort = 0, global_tree = 0, migrate = 0, build = 0, pass = 0, branches = 0, exchange = 0, top = 0;
  double pass_graph = 0, pass_device = 0, pass_wait = 0;
};

// Global cube, global tree, migration, local build. Collective; every step agreed (a bad point on
// one rank: distributed_error on every rank naming it).
distributed_octree build_distributed_octree(const mpi_context& ctx, exchange& ex, std::span<const trees::point> points,
                                            const decomposition_options& options, phase_times* times = nullptr);

struct distributed_moments {
  std::vector<trees::multipole<float>> top;    // per node of tree.top, on every rank
  std::vector<trees::multipole<float>> local;  // per node of tree.local (global nodes: those under branch nodes)
};

// The upward pass of the whole octree: local pass (options.backend), branch payloads, all-gather,
// top tree. `ex` must be an exchange on host memory (mpi_exchange) here; the GPU driver runs the
// same steps with the exchange on device memory. Collective.
distributed_moments distributed_upward_pass(const mpi_context& ctx, exchange& ex, const distributed_octree& tree,
                                            const trees::upward_options& options, phase_times* times = nullptr);

// The payloads of the global tree's nodes from those of its leaves (in Morton order, as the
// all-gather delivers them): leaves copied, each parent the merge of its children in order.
std::vector<trees::multipole<float>> combine_top_tree(const global_tree& top,
                                                      std::span<const trees::multipole<float>> leaves);
// The same in double: the reference a check combines from the branch payloads in double.
std::vector<trees::multipole<double>> combine_top_tree(const global_tree& top,
                                                       std::span<const trees::multipole<double>> leaves);

// Every node of the global octree this rank holds: the nodes of the global tree when
// `with_top` (they are the same on every rank: pass it on one), then the strict descendants of
// its branch nodes. f(level, prefix, payload).
template <class F>
void for_each_global_node(const distributed_octree& tree, const distributed_moments& moments, bool with_top, F&& f);

// A view of a host octree's arrays (for locate_branch and branch_payload on the host).
trees::octree_ref host_ref(const trees::octree& tree);

}  // namespace canopy::distributed

#include <canopy/distributed/detail/for_each_global_node.inl>
