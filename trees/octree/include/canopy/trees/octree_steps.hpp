// The steps of the adaptive octree build as portable functions (CANOPY_HD; g++, and nvcc host and
// device code): which points are rejected, their bounding box, the root cube, a cell's bounds,
// which nodes split, where a node's sorted codes change octant, and where each child goes.
// build_octree (octree.cpp) and the GPU builder (canopy/passes/device_octree_builder.cuh) both
// call these, so the two agree bit for bit.
//
// The double arithmetic goes through detail::add/sub/mul, which are the plain operators on the
// host and __dadd_rn/__dsub_rn/__dmul_rn in device code: nvcc would otherwise fuse a multiply and
// an add into one FMA (rounded once where the host rounds twice), and a cell bound would differ in
// its last bit. g++ emits no FMA for x86-64 without -mfma, so host code rounds every operation.
#pragma once

#include <canopy/config.hpp>
#include <canopy/trees/box.hpp>
#include <canopy/trees/morton.hpp>
#include <canopy/trees/point.hpp>

#include <cstdint>

namespace canopy::trees {

// Deepest level an octree may have: the resolution of 63-bit Morton codes.
inline constexpr int max_octree_depth = 21;

// Largest |coordinate| build_octree accepts: 2^50 (~1.13e15). The float payloads hold second
// moments sum m (x - com)^2; with coordinates near float's limit (3e38) those, and the weighted
// position sums, overflow to infinity (found by the edge-case tests). At 2^50 the squared extent
// is at most 2^102, leaving 2^25 of headroom for masses and counts below float's 2^128.
inline constexpr double max_coordinate_magnitude = 0x1.0p50;

namespace detail {

CANOPY_HD inline double add(double a, double b) {
#if CANOPY_DEVICE_CODE
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
CANOPY_HD inline double sub(double a, double b) {
#if CANOPY_DEVICE_CODE
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
CANOPY_HD inline double mul(double a, double b) {
#if CANOPY_DEVICE_CODE
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
// std::max / std::min semantics (the first argument when neither is less).
template <class T>
CANOPY_HD constexpr T max_of(T a, T b) {
  return a < b ? b : a;
}
template <class T>
CANOPY_HD constexpr T min_of(T a, T b) {
  return b < a ? b : a;
}
// |v|, except that -0.0 stays -0.0: only compared against positive values here, where the sign of
// a zero cannot matter.
CANOPY_HD constexpr double abs_value(double v) { return v < 0.0 ? -v : v; }
CANOPY_HD constexpr int popcount8(unsigned bits) {
  int c = 0;
  for (int i = 0; i < 8; ++i) c += static_cast<int>((bits >> i) & 1u);
  return c;
}

}  // namespace detail

// ---------------------------------------------------------------- points ----------------------

// A point build_octree rejects: a coordinate outside [-2^50, 2^50] (NaN and infinities included)
// or a mass that is NaN or infinite. One comparison pair per value; NaN fails every comparison.
CANOPY_HD constexpr bool rejected_point(float x, float y, float z, float m) {
  constexpr double c = max_coordinate_magnitude;
  constexpr float largest_float = 0x1.fffffep127f;
  const bool coordinates_ok = x >= -c && x <= c && y >= -c && y <= c && z >= -c && z <= c;
  const bool mass_ok = m >= -largest_float && m <= largest_float;
  return !(coordinates_ok && mass_ok);
}

// The bounding box of a set of points (min and max are exact in float, so it does not matter in
// which order parts are merged) and the smallest index of a rejected point in it.
struct point_extent {
  float lo[3];
  float hi[3];
  std::int32_t first_rejected;  // no_rejected_point when none
};
inline constexpr std::int32_t no_rejected_point = 0x7fffffff;  // point indices are below 2^31 - 1

// The identity of merge_extents: an empty box (lo = +max, hi = -max) and no rejected point.
CANOPY_HD constexpr point_extent empty_extent() {
  constexpr float big = 0x1.fffffep127f;
  return point_extent{{big, big, big}, {-big, -big, -big}, no_rejected_point};
}

// The extent of point `index` alone: its box, or, when it is rejected, an empty box naming it.
CANOPY_HD constexpr point_extent extent_of(float x, float y, float z, float m, std::int32_t index) {
  if (rejected_point(x, y, z, m)) {
    point_extent e = empty_extent();
    e.first_rejected = index;
    return e;
  }
  return point_extent{{x, y, z}, {x, y, z}, no_rejected_point};
}

CANOPY_HD constexpr point_extent merge_extents(const point_extent& a, const point_extent& b) {
  point_extent r{};
  for (int i = 0; i < 3; ++i) {
    r.lo[i] = detail::min_of(a.lo[i], b.lo[i]);
    r.hi[i] = detail::max_of(a.hi[i], b.hi[i]);
  }
  r.first_rejected = detail::min_of(a.first_rejected, b.first_rejected);
  return r;
}

// ---------------------------------------------------------------- cells -----------------------

// The root cell of build_octree: the bounding cube of a non-empty point set with bounding box
// [lo, hi], centred on the box, edge = the largest extent padded by 2^-16 relative (1.0 when all
// points coincide), but at least 2^-24 of the coordinates' magnitude, so that every point lies
// strictly inside.
CANOPY_HD inline box bounding_cube(const double lo[3], const double hi[3]) {
  using detail::add, detail::sub, detail::mul;
  double edge = 0.0;
  for (int a = 0; a < 3; ++a) edge = detail::max_of(edge, sub(hi[a], lo[a]));
  // Pad so that the largest points fall strictly below the upper faces: a relative 2^-16 is far
  // above the rounding of centre +- half (2^-52 of the coordinates' magnitude) for any cloud
  // whose extent is not 2^-36 of its distance from the origin; morton_quantize clamps the rest.
  edge = edge > 0.0 ? mul(edge, 1.0 + 0x1.0p-16) : 1.0;
  // Far from the origin a tiny (or zero) extent would give cells whose faces round to the same
  // double: keep the root edge at least 2^-24 of the coordinates' magnitude, so that even a cell
  // on level 21 (2^-45 of it) stays 7 bits above double's resolution there. Only sets that
  // (almost) coincide are affected: distinct float coordinates already differ by 2^-24 of their
  // magnitude. Coincident points at 1e15 get a root cube of edge ~6e7 instead of 0.
  double magnitude = 0.0;
  for (int a = 0; a < 3; ++a) {
    magnitude = detail::max_of(magnitude, detail::max_of(detail::abs_value(lo[a]), detail::abs_value(hi[a])));
  }
  edge = detail::max_of(edge, mul(magnitude, 0x1.0p-24));
  box cube{};
  for (int a = 0; a < 3; ++a) {
    const double centre = mul(0.5, add(lo[a], hi[a]));
    cube.lo[a] = sub(centre, mul(0.5, edge));
    cube.hi[a] = add(cube.lo[a], edge);
  }
  return cube;
}

// bounding_cube of a point_extent (floats widen to double exactly).
CANOPY_HD inline box bounding_cube(const point_extent& e) {
  const double lo[3] = {e.lo[0], e.lo[1], e.lo[2]};
  const double hi[3] = {e.hi[0], e.hi[1], e.hi[2]};
  return bounding_cube(lo, hi);
}

// The cell of Morton prefix `prefix` on level `level` (0..21) of `cube`: edge = cube edge / 2^level
// (exact: a power of two), lo = cube.lo + index * edge, hi = cube.lo + (index + 1) * edge.
CANOPY_HD inline box cell_box(const box& cube, std::uint64_t prefix, int level) {
  using detail::add, detail::sub, detail::mul;
  const double edge = mul(sub(cube.hi[0], cube.lo[0]), 1.0 / static_cast<double>(std::uint64_t{1} << level));
  const morton_cell c = morton_decode(prefix);
  const double idx[3] = {static_cast<double>(c.x), static_cast<double>(c.y), static_cast<double>(c.z)};
  box b{};
  for (int a = 0; a < 3; ++a) {
    b.lo[a] = add(cube.lo[a], mul(idx[a], edge));
    b.hi[a] = add(cube.lo[a], mul(add(idx[a], 1.0), edge));
  }
  return b;
}

// ---------------------------------------------------------------- splitting -------------------

// A node splits when it holds more than max_leaf points and sits above max_depth.
CANOPY_HD constexpr bool node_splits(std::int32_t point_count, int level, int max_leaf, int max_depth) {
  return level < max_depth && point_count > max_leaf;
}

// Where octant `octant` of a level-`level` node (level < 21) ends: the first position in
// [begin, end) of the Morton-sorted `codes` whose octant below the node is greater than `octant`
// (end when none). The node's codes share their first 3*level bits, so the octant is monotone over
// the range and one binary search finds the boundary (std::partition_point).
CANOPY_HD inline std::int32_t octant_end(const std::uint64_t* codes, std::int32_t begin, std::int32_t end, int level,
                                         unsigned octant) {
  std::int32_t lo = begin, count = end - begin;
  while (count > 0) {
    const std::int32_t half = count / 2;
    if (morton_octant(codes[lo + half], level) <= octant) {
      lo += half + 1;
      count -= half + 1;
    } else {
      count = half;
    }
  }
  return lo;
}

// The octants of a splitting node that hold points, as bits (bit o: octant o), from the ends of
// its eight octant ranges (ends[o] = octant_end(..., o); octant o covers [ends[o-1], ends[o]),
// octant 0 starts at the node's first point `begin`).
CANOPY_HD constexpr unsigned occupied_octants(std::int32_t begin, const std::int32_t ends[8]) {
  unsigned bits = 0;
  std::int32_t from = begin;
  for (unsigned o = 0; o < 8; ++o) {
    bits |= static_cast<unsigned>(ends[o] > from) << o;
    from = ends[o];
  }
  return bits;
}

// A node's children are its non-empty octants in increasing octant order: the one of octant
// `octant` is child number child_rank(occupied, octant) (the occupied octants below it).
CANOPY_HD constexpr int child_rank(unsigned occupied, unsigned octant) {
  return detail::popcount8(occupied & ((1u << octant) - 1u));
}
CANOPY_HD constexpr int child_total(unsigned occupied) { return detail::popcount8(occupied); }

}  // namespace canopy::trees
