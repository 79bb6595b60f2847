// SPDX-License-Identifier: Apache-2.0
// The GPU path of the distributed octree (built with CUDA and NCCL: CANOPY_DISTRIBUTED_HAVE_NCCL):
// the same steps as build_distributed_octree and distributed_upward_pass (distributed_octree.hpp),
// with this rank's points, codes, local tree and payloads on its GPU and the data exchanged through
// NCCL (nccl_exchange); MPI carries only the control values (counts, agreement).
//
//   canopy::distributed::nccl_exchange ex(ctx, local_rank, stream);
//   canopy::distributed::device_distributed_octree tree;
//   tree.build(ctx, ex, d_points, n, options);            // global cube, global tree, migration, local build
//   auto top = tree.upward(ctx, ex, pass_options);        // local pass, branches, all-gather, top tree
//
// Steps on the device: the bounding box (cub::DeviceReduce), Morton codes over the global cube,
// one cub::DeviceRadixSort of (code, index), the octant counts of each level of the global tree
// by binary searches (ncclAllReduce), the send counts likewise, the points migrated by grouped
// ncclSend/ncclRecv, the local tree by device_octree_builder over the global cube, the pass by
// upward_runner over the device tree, the branch payloads by one thread per global leaf
// (branch_payload.hpp), gathered by grouped ncclBroadcast; the top tree (a few thousand nodes at
// most) is combined on the host.
// Host code: g++ can include this header; the kernels are in src/device_distributed_octree.cu.
#pragma once

#include <canopy/distributed/distributed_octree.hpp>
#include <canopy/distributed/global_tree.hpp>
#include <canopy/distributed/mpi_context.hpp>
#include <canopy/distributed/nccl_exchange.hpp>
#include <canopy/passes/upward_runner.hpp>
#include <canopy/trees/multipole.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/passes/octree_ref.hpp>
#include <canopy/trees/point.hpp>

#include <cstdint>
#include <memory>
#include <vector>

struct CUstream_st;

namespace canopy::distributed {

// Per-point data that follows the points through the sort, the migration and the build (a
// simulation's velocities and ids): `words` 32-bit words per point at `data` (device memory), in
// the order of the points given to build(). None when words is 0.
struct point_companions {
  const std::uint32_t* data = nullptr;
  int words = 0;
};

class device_distributed_octree {
 public:
  // Its kernels and copies run on the exchange's stream (nccl_exchange::stream()).
  device_distributed_octree();
  ~device_distributed_octree();
  device_distributed_octree(device_distributed_octree&&) noexcept;
  device_distributed_octree& operator=(device_distributed_octree&&) noexcept;

  // This rank's `count` points at `points` (device memory). Collective; every step agreed.
  // `points` (and the companions) may be a view of this object's own arrays (local_tree().points,
  // companions()): they are read before anything is written.
  void build(const mpi_context& ctx, nccl_exchange& ex, const trees::point* points, std::size_t count,
             const decomposition_options& options, phase_times* times = nullptr, point_companions companions = {});
  // The payloads of every node of the global tree (on every rank); the local ones stay on the
  // device (download_local_payloads()). options.backend must be gpu. The runner is kept between
  // calls (set_tree to the next build), as a simulation step keeps it. Collective.
  std::vector<trees::multipole<float>> upward(const mpi_context& ctx, nccl_exchange& ex,
                                              const trees::upward_options& options, phase_times* times = nullptr);

  const global_tree& top() const;
  // Where each owned global leaf lies in the local tree (as distributed_octree::branches).
  const std::vector<branch_location>& branches() const;
  // For checking: the local tree and its payloads, copied to the host (waits for the stream).
  trees::octree download_local() const;
  std::vector<trees::multipole<float>> download_local_payloads() const;
  // The points this rank holds after the migration.
  std::size_t local_points() const;

  // Device views for work that goes on on the GPU (valid until the next build; the payloads until
  // the next upward): the local tree (its points in Morton order), its payloads after upward(),
  // where each owned global leaf lies in it (branches(), in device memory), and the companions in
  // the local tree's point order (companion_words() words per point; null without companions).
  trees::octree_ref local_tree() const;
  const trees::multipole<float>* local_payloads() const;
  const branch_location* device_branches() const;
  std::uint32_t* companions() const;
  int companion_words() const;

 private:
  struct state;
  std::unique_ptr<state> s_;
};

}  // namespace canopy::distributed
