// SPDX-License-Identifier: Apache-2.0
// The distributed step's walk on this rank's GPU (distributed_walk_gpu.cu, built with CANOPY_GPU):
// the tree distributed_step assembled on the host (the top tree, this rank's subtrees, the
// received essential trees; this rank's bodies then the received ones) is uploaded, and the GPU
// path's walk cells and warp-per-group walk (group_walk.cuh) run over it. Plain C++, so the host
// files compile without CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tree_walk.hpp"

namespace nbody {

struct gpu_walk_times {
  double upload_ms = 0;  // the tree and the bodies to the device
  double walk_ms = 0;    // walk cells and group walk (CUDA events)
};

class gpu_walker {
 public:
  virtual ~gpu_walker() = default;
  virtual std::string describe() const = 0;
  // `tree`: host arrays of `nodes` nodes over `points` bodies; `groups`: the walk's groups of this
  // rank's bodies (tree.points[0, own)), packed as group_walk.cuh's walk_group. out[i] = the force
  // on tree.points[i], i < own.
  virtual void walk(const walk_tree& tree, std::int32_t nodes, std::int32_t points, std::int32_t own,
                    const std::vector<std::uint64_t>& groups, const walk_params& params, body_force* out,
                    gpu_walk_times& times) = 0;
};

// The walker on device `local_rank` modulo the visible devices. Throws std::runtime_error without a
// usable device, or in a build without CUDA.
std::unique_ptr<gpu_walker> make_gpu_walker(int local_rank);

}  // namespace nbody
