// SPDX-License-Identifier: Apache-2.0
// 63-bit Morton (Z-order) codes: 21 bits per axis, interleaved as ... x1 y1 z1 x0 y0 z0, so the
// three bits at level L (1 = the root's children) are (code >> 3*(21-L)) & 7 = x<<2 | y<<1 | z,
// the octant of the child: bit 2 set = upper half in x, bit 1 = upper in y, bit 0 = upper in z.
// Sorting points by code lays every octree cell out as one contiguous range, in depth-first order.
//
// The encode/decode/quantize functions are portable (CANOPY_HD, plain integer and double
// arithmetic), so kernels can compute codes with exactly the host's rounding.
#pragma once

#include <canopy/config.hpp>
#include <canopy/trees/box.hpp>
#include <canopy/trees/point.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace canopy::trees {

inline constexpr int morton_bits_per_axis = 21;
inline constexpr std::uint32_t morton_axis_cells = 1u << morton_bits_per_axis;  // 2^21 cells per axis

// Spreads the low 21 bits of v so that bit i moves to bit 3i.
CANOPY_HD inline std::uint64_t morton_spread(std::uint32_t v) {
  std::uint64_t x = v & 0x1fffffu;
  x = (x | x << 32) & 0x1f00000000ffffull;
  x = (x | x << 16) & 0x1f0000ff0000ffull;
  x = (x | x << 8) & 0x100f00f00f00f00full;
  x = (x | x << 4) & 0x10c30c30c30c30c3ull;
  x = (x | x << 2) & 0x1249249249249249ull;
  return x;
}

// Inverse of morton_spread: gathers bits 0, 3, 6, ... into the low 21 bits.
CANOPY_HD inline std::uint32_t morton_compact(std::uint64_t x) {
  x &= 0x1249249249249249ull;
  x = (x ^ (x >> 2)) & 0x10c30c30c30c30c3ull;
  x = (x ^ (x >> 4)) & 0x100f00f00f00f00full;
  x = (x ^ (x >> 8)) & 0x1f0000ff0000ffull;
  x = (x ^ (x >> 16)) & 0x1f00000000ffffull;
  x = (x ^ (x >> 32)) & 0x1fffffull;
  return static_cast<std::uint32_t>(x);
}

// Cell coordinates on one level of the grid (each < 2^level, at most 2^21).
struct morton_cell {
  std::uint32_t x, y, z;
};

CANOPY_HD inline std::uint64_t morton_encode(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  return morton_spread(x) << 2 | morton_spread(y) << 1 | morton_spread(z);
}

CANOPY_HD inline morton_cell morton_decode(std::uint64_t code) {
  return morton_cell{morton_compact(code >> 2), morton_compact(code >> 1), morton_compact(code)};
}

// The code of the level-`level` cell that contains a full-depth code (its first 3*level bits).
// Decoding the prefix gives that cell's coordinates on the 2^level grid.
CANOPY_HD inline std::uint64_t morton_prefix(std::uint64_t code, int level) {
  return code >> (3 * (morton_bits_per_axis - level));
}

// The child octant (0..7) a full-depth code falls into below a node of level `level` (< 21).
CANOPY_HD inline unsigned morton_octant(std::uint64_t code, int level) {
  return static_cast<unsigned>(code >> (3 * (morton_bits_per_axis - 1 - level))) & 7u;
}

// Maps a cube onto the 2^21 grid. Computed once per tree; `inv_cell` = 2^21 / edge.
struct morton_grid {
  double lo[3];
  double inv_cell;
};

CANOPY_HD inline morton_grid make_morton_grid(const box& cube) {
  return morton_grid{{cube.lo[0], cube.lo[1], cube.lo[2]},
                     static_cast<double>(morton_axis_cells) / (cube.hi[0] - cube.lo[0])};
}

// Grid coordinate of one axis, clamped to [0, 2^21 - 1] so that a value on or past the upper face
// (or NaN) still yields a valid cell instead of undefined behaviour in the conversion.
CANOPY_HD inline std::uint32_t morton_quantize(double v, double lo, double inv_cell) {
  double t = (v - lo) * inv_cell;
  if (!(t > 0.0)) return 0;  // also catches NaN
  if (t >= static_cast<double>(morton_axis_cells - 1)) return morton_axis_cells - 1;
  return static_cast<std::uint32_t>(t);  // truncation == floor for t > 0
}

CANOPY_HD inline std::uint64_t morton_code(const point& p, const morton_grid& g) {
  return morton_encode(morton_quantize(p.x, g.lo[0], g.inv_cell), morton_quantize(p.y, g.lo[1], g.inv_cell),
                       morton_quantize(p.z, g.lo[2], g.inv_cell));
}

// Host helper: the codes of all points in `cube` (cubic: hi - lo equal on every axis), computed
// on host_threads() threads.
std::vector<std::uint64_t> morton_codes(std::span<const point> points, const box& cube);

}  // namespace canopy::trees
