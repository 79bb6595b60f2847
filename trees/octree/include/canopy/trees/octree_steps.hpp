// SPDX-License-Identifier: Apache-2.0
// The steps of the adaptive octree build as portable functions (CANOPY_HD; g++, and nvcc host and
// device code): which points are rejected, their bounding box, the root cube, a cell's bounds
// (build_octree in octree.cpp and the GPU builder both call these, so the two agree bit for bit),
// and the GPU builder's flat build: every point's node levels from its sorted neighbours, and each
// node's links from the level-by-level numbering (driven over host arrays by the CPU test).
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

}  // namespace detail

// ---------------------------------------------------------------- points ----------------------

// A point build_octree rejects: a coordinate outside [-2^50, 2^50] (NaN and infinities included)
// or a mass that is negative, NaN or infinite (as the readers reject it). One comparison pair per
// value; NaN fails every comparison.
CANOPY_HD constexpr bool rejected_point(float x, float y, float z, float m) {
  constexpr double c = max_coordinate_magnitude;
  constexpr float largest_float = 0x1.fffffep127f;
  const bool coordinates_ok = x >= -c && x <= c && y >= -c && y <= c && z >= -c && z <= c;
  const bool mass_ok = m >= 0.0f && m <= largest_float;
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

// ---------------------------------------------------------------- the flat build --------------
//
// The GPU builder derives the whole tree from the sorted codes without a level loop (and so
// without a host round trip per level). For point i of the Morton-sorted codes:
//  * its level-L cell is the run of points that share the first 3L code bits with it;
//  * that cell splits when it holds more than max_leaf points and L < max_depth. Cell sizes only
//    shrink going down, so the cells of i that split are those of levels 0..D, and i's leaf sits
//    on level leaf_level(i) = min(max_depth, D + 1);
//  * the cell of i holds more than max_leaf points exactly when some window of max_leaf + 1
//    consecutive points that contains i lies inside it. So D + 1 is the largest window_level(j)
//    over the windows [j, j + max_leaf] that contain i, a sliding maximum (the builder computes it
//    with two segmented scans, van Herk / Gil-Werman);
//  * i starts a cell on every level from first_level(i) down; it starts a node on the levels
//    first_level(i)..leaf_level(i) (none when that is empty). A point that starts at least one
//    node starts exactly one leaf (on leaf_level(i)): the "leaf starts", in point order the
//    leaves in Morton order.
// Numbering the nodes level by level, each level in point order, gives build_octree's numbering;
// flat_node() then finds a node's links from that numbering and its inverse (a leaf's range in
// O(1), an internal node's end by one binary search over its codes).

namespace detail {
CANOPY_HD inline int leading_zeros64(std::uint64_t x) {  // x != 0
#if CANOPY_DEVICE_CODE
  return __clzll(static_cast<long long>(x));
#else
  return __builtin_clzll(x);
#endif
}
}  // namespace detail

// The deepest level on which codes a and b lie in the same cell (21 when they are equal).
CANOPY_HD inline int common_level(std::uint64_t a, std::uint64_t b) {
  const std::uint64_t x = a ^ b;
  if (x == 0) return max_octree_depth;
  return (detail::leading_zeros64(x) - 1) / 3;  // 63-bit codes: bit 63 is zero in both
}

// 1 + the deepest level whose cell holds both ends of a window of sorted codes (0 is kept for
// "no window").
CANOPY_HD inline std::uint8_t window_level(std::uint64_t first, std::uint64_t last) {
  return static_cast<std::uint8_t>(1 + common_level(first, last));
}
// The same for the window [j, j + max_leaf] of the sorted codes (and so max_leaf + 1 points), 0
// when there is no such window (j + max_leaf >= n).
CANOPY_HD inline std::uint8_t window_level(const std::uint64_t* codes, std::int64_t n, std::int64_t j,
                                           std::int64_t max_leaf) {
  return j + max_leaf >= n ? std::uint8_t{0} : window_level(codes[j], codes[j + max_leaf]);
}

// The shallowest level on which a point starts a cell, from its code and the previous point's:
// never (22) for a repeat of the previous code. The first point starts the root (level 0).
CANOPY_HD inline int first_level(std::uint64_t previous, std::uint64_t code) { return common_level(previous, code) + 1; }
CANOPY_HD inline int first_level(const std::uint64_t* codes, std::int64_t i) {
  return i == 0 ? 0 : first_level(codes[i - 1], codes[i]);
}

// The level of point i's leaf from the largest window_level over the windows that contain it.
CANOPY_HD constexpr int leaf_level(int largest_window_level, int max_depth) {
  return detail::min_of(largest_window_level, max_depth);
}

// The largest of P[t .. t + w - 1] from the prefix maxima `pre` and suffix maxima `suf` of P
// taken within the aligned segments [k w, (k + 1) w) (van Herk / Gil-Werman: a window of w
// straddles at most two segments). The builder's P[t] is window_level(t - max_leaf), 0 for t <
// max_leaf, with w = max_leaf + 1: the window of t = i covers the windows that contain point i.
CANOPY_HD inline std::uint8_t sliding_max(const std::uint8_t* pre, const std::uint8_t* suf, std::int64_t t, std::int64_t w) {
  return t % w == 0 ? suf[t] : detail::max_of(suf[t], pre[t + w - 1]);
}

// A point's levels, packed in 16 bits: first_level in the low byte, leaf_level in the high one.
CANOPY_HD constexpr std::uint16_t pack_span(int first, int leaf) {
  return static_cast<std::uint16_t>(first | leaf << 8);
}
CANOPY_HD constexpr int span_first(std::uint16_t s) { return s & 0xff; }
CANOPY_HD constexpr int span_leaf(std::uint16_t s) { return s >> 8; }
CANOPY_HD constexpr bool starts_leaf(std::uint16_t s) { return span_first(s) <= span_leaf(s); }
CANOPY_HD constexpr int span_nodes(std::uint16_t s) { return starts_leaf(s) ? span_leaf(s) - span_first(s) + 1 : 0; }

// What flat_node reads: the sorted codes, the leaf starts (the point of each, in point order), the
// span of every point, and the nodes numbered level by level: node_leaf[id] = the leaf start
// whose point begins node id (ascending within a level); the node of leaf start e on level l is
// node_of_slot[first_slot[e] + l - span_first(e's span)] (first_slot: the exclusive sum of the leaf
// starts' node counts); level_offset as build_octree's, every one of its 23 slots filled.
struct flat_tree_view {
  const std::uint64_t* codes;
  std::int32_t n;
  const std::int32_t* leaf_point;  // per leaf start
  std::int32_t leaf_count;
  const std::uint16_t* span;       // per point
  const std::int32_t* node_leaf;   // per node
  const std::int32_t* first_slot;  // per leaf start
  const std::int32_t* node_of_slot;  // per node
  const std::int32_t* level_offset;
};

// A node's links but its parent: the caller sets parent[first_child + k] = id for its children
// (and -1 for the root), so that no node searches for its parent.
struct flat_node_links {
  std::int32_t first_child, child_count, point_begin, point_count;
  bool leaf;
};

// Node `id` on level `level` of the flat numbering: its point range, children, and whether it is a
// leaf. Reads only the view (never another node's result), so every node can be computed at once.
CANOPY_HD inline flat_node_links flat_node(const flat_tree_view& v, std::int32_t id, int level) {
  const std::int32_t e = v.node_leaf[id];
  const std::int32_t begin = v.leaf_point[e];
  const std::uint16_t s = v.span[begin];
  flat_node_links r{-1, 0, begin, 0, span_leaf(s) == level};
  if (r.leaf) {  // leaves tile the points: this one ends where the next begins
    r.point_count = (e + 1 < v.leaf_count ? v.leaf_point[e + 1] : v.n) - begin;
    return r;
  }
  // The end: where the next node on this level starts when it is a sibling (no cell of the
  // parent lies between two of its children); else the first point after begin outside the
  // node's cell, before the next node's start (the points between belong to shallower leaves).
  const std::int32_t next_start = id + 1 < v.level_offset[level + 1] ? v.leaf_point[v.node_leaf[id + 1]] : v.n;
  const bool sibling_next = level > 0 && next_start < v.n &&
                            morton_prefix(v.codes[next_start], level - 1) == morton_prefix(v.codes[begin], level - 1);
  const std::uint64_t prefix = morton_prefix(v.codes[begin], level);
  std::int32_t lo = sibling_next ? next_start : begin + 1, count = sibling_next ? 0 : next_start - lo;
  while (count > 0) {  // partition point of "same cell"
    const std::int32_t half = count / 2;
    if (morton_prefix(v.codes[lo + half], level) == prefix) {
      lo += half + 1;
      count -= half + 1;
    } else {
      count = half;
    }
  }
  r.point_count = lo - begin;
  // The first child starts where the node starts (the same leaf start, one level down); the
  // others follow it on that level, at most 7 more, while they start inside the node.
  r.first_child = v.node_of_slot[v.first_slot[e] + level + 1 - span_first(s)];
  const std::int32_t last = v.level_offset[level + 2];
  int k = 1;
  while (k < 8 && r.first_child + k < last && v.leaf_point[v.node_leaf[r.first_child + k]] < lo) ++k;
  r.child_count = k;
  return r;
}

// The arrays a build fills per node (build_octree's; leaves per leaf start).
struct flat_tree_out {
  std::int32_t* parent;
  std::int32_t* first_child;
  std::int32_t* child_count;
  std::int32_t* point_begin;
  std::int32_t* point_count;
  std::uint8_t* level;
  box* bounds;
  std::int32_t* leaves;
};

// Everything node `id` writes: its links, level and cell (of the root cube `cube`); its children's parent (the root's -1);
// a leaf its entry in the leaves (at its leaf start's index, so the leaves come out in Morton
// order). The GPU builder's emit_nodes runs it once per node, the CPU test in scrambled order.
CANOPY_HD inline void emit_flat_node(const flat_tree_view& v, const box& cube, std::int32_t id, int level,
                                     const flat_tree_out& out) {
  const flat_node_links r = flat_node(v, id, level);
  if (id == 0) out.parent[0] = -1;
  for (std::int32_t k = 0; k < r.child_count; ++k) out.parent[r.first_child + k] = id;
  out.first_child[id] = r.first_child;
  out.child_count[id] = r.child_count;
  out.point_begin[id] = r.point_begin;
  out.point_count[id] = r.point_count;
  out.level[id] = static_cast<std::uint8_t>(level);
  // The root's cell is the cube itself, as build_octree stores it (cell_box would recompute its
  // upper faces as lo + edge, which can round differently from the cube's hi).
  out.bounds[id] = level == 0 ? cube : cell_box(cube, morton_prefix(v.codes[r.point_begin], level), level);
  if (r.leaf) out.leaves[v.node_leaf[id]] = id;
}

}  // namespace canopy::trees
