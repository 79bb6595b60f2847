// SPDX-License-Identifier: Apache-2.0
// Internal: the lattice points shared by generate_lattice and build_complete_octree.
#pragma once

#include <canopy/trees/point.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace canopy::trees::detail {

// Validates (depth, per_leaf) for `who` (the entry point named in input_error) and returns
// 8^depth * per_leaf.
std::size_t lattice_point_count(const char* who, int depth, int per_leaf);

// Fills out (of lattice_point_count points) in Morton order of the finest cells.
void fill_lattice_points(std::span<point> out, int depth, int per_leaf, std::uint64_t seed);

}  // namespace canopy::trees::detail
