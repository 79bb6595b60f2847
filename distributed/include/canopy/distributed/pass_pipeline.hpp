// SPDX-License-Identifier: Apache-2.0
// The whole distributed upward pass of a set of points held in parts, as one call: exchange set-up
// (MPI on host memory, or NCCL on this rank's GPU), then `runs` times the global cube, global tree,
// migration, local build, local pass, branch exchange and top tree, timed per phase; optionally
// every node checked against the double-precision reference. What `canopy accumulate|validate|
// bench` and canopy-dist-bench run under mpiexec.
//
//   canopy::distributed::mpi_context ctx(MPI_COMM_WORLD);
//   canopy::distributed::pipeline_options o;
//   o.validate = true;
//   auto r = canopy::distributed::run_pass_pipeline(ctx, my_points, o);   // collective
//   if (ctx.rank() == 0) print(r.root, r.check->ok);
//
// The check needs no rank to hold all points: each rank compares its local tree with
// reference_upward_pass (double) of that tree, and the global tree with the double combination of
// the reference's branch payloads (gathered); the worst errors are reduced over the ranks.
#pragma once

#include <canopy/distributed/distributed_octree.hpp>
#include <canopy/distributed/mpi_context.hpp>
#include <canopy/distributed/watchdog.hpp>
#include <canopy/passes/upward_runner.hpp>
#include <canopy/trees/multipole.hpp>
#include <canopy/trees/point.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace canopy::distributed {

enum class exchange_kind {
  mpi,   // MPI on host memory; the pass on options.pass.backend (cpu or gpu)
  nccl,  // NCCL on device memory, the GPU path (device_distributed_octree); needs a build with NCCL
};

struct pipeline_options {
  exchange_kind exchange = exchange_kind::mpi;
  decomposition_options decomposition;
  trees::upward_options pass;
  int runs = 1;           // timed repetitions of the whole pipeline (build and pass) over the same points
  bool validate = false;  // check every node after the last run
  bool describe = false;  // pipeline_result::local_tree: this rank's tree in a few numbers
  bool probe = false;     // pipeline_result::probe: cudaMalloc/cudaFree/round-trip costs (nccl only)
};

// The worst error of a quantity over every node of every rank, and whether it is within bound.
struct pipeline_error {
  double worst = 0;
  double bound = 0;  // the bound at the rank and quantity where worst / bound is largest
  bool within = true;
};

struct pipeline_check {
  bool ok = false;                 // every rank's local tree and the top tree within bounds, counts exact
  bool local_counts_match = true;  // every rank
  bool top_counts_match = true;
  pipeline_error local_mass, local_com, local_m2, local_bbox;  // the local trees against their reference
  double top_mass = 0, top_com = 0, top_m2 = 0;                 // the top tree against its double combination
  std::vector<std::string> rank_lines;  // on rank 0: one line per rank, in rank order
};

struct pipeline_result {
  std::vector<phase_times> runs;  // this rank's, one per run
  trees::multipole<float> root;   // the global octree's root (every rank)
  std::uint64_t points = 0;       // over all ranks
  std::int32_t top_nodes = 0, top_leaves = 0, top_depth = 0;
  std::string where;      // "MPI exchange on host memory, cpu backend", "NCCL exchange on device memory, ..."
  std::string device;     // the GPU of this rank when the nccl path runs ("" otherwise)
  std::optional<pipeline_check> check;  // when options.validate (the same on every rank but rank_lines)
  std::string local_tree;  // options.describe
  std::string probe;       // options.probe
};

// Collective: every rank calls it with its part of the points. Every step agreed (a failure on one
// rank: distributed_error on every rank naming it). `dog`, when given, is told each phase.
pipeline_result run_pass_pipeline(const mpi_context& ctx, std::span<const trees::point> points,
                                  const pipeline_options& options, watchdog* dog = nullptr);

// Rank 0 receives every rank's `line`, in rank order (other ranks get an empty vector). Collective.
std::vector<std::string> gather_lines(const mpi_context& ctx, const std::string& line);

// This rank among the ranks of its host (MPI_COMM_TYPE_SHARED): its index there, which picks its
// GPU (modulo the host's GPUs), and their count, which shares the host's cores. Collective.
struct host_ranks {
  int rank = 0;
  int size = 1;
};
host_ranks ranks_on_host(const mpi_context& ctx);

}  // namespace canopy::distributed
