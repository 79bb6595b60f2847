// SPDX-License-Identifier: Apache-2.0
// A point of the octree workload: position and mass, 16 bytes, so that a GPU thread loads one
// point with a single 16-byte (float4-sized) coalesced load.
#pragma once

#include <type_traits>

namespace canopy::trees {

struct alignas(16) point {
  float x, y, z, m;
};

static_assert(sizeof(point) == 16, "point must stay 16 bytes: the binary file format and the GPU loads rely on it");
static_assert(std::is_trivially_copyable_v<point>);

}  // namespace canopy::trees
