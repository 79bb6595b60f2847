// SPDX-License-Identifier: Apache-2.0
// The device view of an octree (the arrays of canopy/trees/octree.hpp, in device memory), apart
// from its owner (device_octree.cuh) so that host-only interfaces such as upward_runner.hpp can
// hand it out without CUDA headers. Portable: g++ and nvcc.
#pragma once

#include <canopy/trees/point.hpp>

#include <cstdint>
#include <type_traits>

namespace canopy::trees {

// Trivially copyable: pass it by value to kernels. Valid while the device_octree it came from
// lives and is not moved.
struct octree_ref {
  const point* points = nullptr;              // sorted by Morton code; 16-byte aligned (float4 loads)
  const std::int32_t* parent = nullptr;       // -1 for the root
  const std::int32_t* first_child = nullptr;  // -1 for leaves
  const std::int32_t* child_count = nullptr;  // 0 for leaves
  const std::int32_t* point_begin = nullptr;
  const std::int32_t* point_count = nullptr;
  const std::int32_t* leaves = nullptr;        // leaf ids in Morton order (= increasing point_begin)
  const std::int32_t* level_offset = nullptr;  // depth + 2 entries; also kept on the host
  std::int32_t node_count = 0;
  std::int32_t leaf_count = 0;
  std::int32_t point_total = 0;  // number of points
  std::int32_t depth = 0;        // deepest level (root is level 0)
};

static_assert(std::is_trivially_copyable_v<octree_ref>, "octree_ref is passed by value into kernels");

}  // namespace canopy::trees
