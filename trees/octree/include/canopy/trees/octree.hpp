// SPDX-License-Identifier: Apache-2.0
// Octrees in the scheduler's layout: structure of arrays, level-ordered (all nodes of level 0,
// then level 1, ...), each level in Morton order, the children of a node contiguous. Complete and
// adaptive trees share the layout, so the upward pass needs no case for either.
#pragma once

#include <canopy/trees/box.hpp>
#include <canopy/trees/errors.hpp>
#include <canopy/trees/octree_steps.hpp>
#include <canopy/trees/point.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace canopy::trees {

// max_octree_depth (21) and max_coordinate_magnitude (2^50) are in octree_steps.hpp, with the
// portable steps of the build that the GPU builder shares.

struct octree {
  int depth = 0;                              // deepest level (root is level 0)
  std::vector<std::int32_t> level_offset;     // level L holds nodes [level_offset[L], level_offset[L+1]); depth + 2 entries
  std::vector<std::int32_t> parent;           // -1 for the root
  std::vector<std::int32_t> first_child;      // -1 for leaves; children are contiguous
  std::vector<std::int32_t> child_count;      // 0 for leaves, else 1..8
  std::vector<std::int32_t> point_begin;      // every node covers points[point_begin, +point_count)
  std::vector<std::int32_t> point_count;
  std::vector<std::uint8_t> level;
  std::vector<box> bounds;                    // the node's cubic cell; the root's is the padded bounding cube
  std::vector<std::int32_t> leaves;           // leaf ids in Morton (depth-first) order = increasing point_begin
  std::vector<point> points;                  // input points sorted by Morton code

  std::int32_t node_count() const { return static_cast<std::int32_t>(parent.size()); }
  bool is_leaf(std::int32_t n) const { return child_count[static_cast<std::size_t>(n)] == 0; }
};

struct build_options {
  int max_leaf = 32;   // a node with at most this many points is a leaf (>= 1)
  int max_depth = 21;  // a node on this level is a leaf whatever its size (0..21)
  // The root cell, when given, instead of the points' bounding cube: a cube (equal, positive,
  // finite edges) that holds every point in [lo, hi). A rank of a distributed build gives the
  // global cube, so that its cells and Morton codes are those of the tree of all ranks' points.
  std::optional<box> cube = std::nullopt;
};

// Why `cube` cannot be the root cell of points whose bounding box is [lo, hi] ("" when it can):
// not a cube of positive finite edge, or the box not inside [cube.lo, cube.hi). Both builders check
// a given cube with it.
std::string given_cube_problem(const box& cube, const double lo[3], const double hi[3]);

// Adaptive octree of `points` (at most 2^31 - 1, all coordinates and masses finite, coordinates at
// most max_coordinate_magnitude in absolute value).
// The root cell is the bounding cube of the points: centred on their bounding box, edge = the
// largest extent padded by 2^-16 relative (1.0 when all points coincide), but at least 2^-24 of
// the coordinates' magnitude (so far from the origin the cube keeps a positive edge), so every point lies
// strictly inside. Points are sorted by 63-bit Morton code (stable: equal codes keep input order);
// nodes are split top-down; a node is a leaf when it holds <= max_leaf points or sits on level
// max_depth (so coincident points end in one leaf on max_depth, possibly larger than max_leaf);
// only non-empty children are created.
// Empty input gives a tree with exactly one node: an empty leaf root (point_count 0) over the unit
// cube, so node 0 is always the root and a scheduler always has a task that completes the pass.
// Throws input_error for max_leaf < 1, max_depth outside [0, 21], too many points, a
// non-finite coordinate or mass, or a coordinate beyond max_coordinate_magnitude.
octree build_octree(std::span<const point> points, const build_options& options = {});

// The input_error build_octree throws for point `index` (rejected_point(p)): "<source>: point
// <index> (x, y, z, m <m>) is not finite" or "... has a coordinate beyond +-2^50 ...". The GPU
// builder throws the same, with its own source.
input_error rejected_point_error(std::string source, std::size_t index, const point& p);

// The largest total mass x max(1, L)^2 (L: the root edge plus the largest |coordinate|) whose float
// moments cannot overflow (2^120, float's 2^128 less room for a merge's sums).
inline constexpr double max_moment_magnitude = 0x1.0p120;

// Throws input_error(source, ...) when `total_mass` x max(1, L)^2 of points in `cube` exceeds
// max_moment_magnitude: their float mass, first or second moments could overflow to inf.
void check_moment_range(const std::string& source, double total_mass, const box& cube);

// Complete octree of the unit cube: every node on levels < depth has 8 children, every leaf (on
// level `depth`) per_leaf points, 8^depth * per_leaf points in all. The points are exactly
// generate_lattice(depth, per_leaf, seed), generated in place in Morton order (no sort), and the
// arrays filled in closed form, O(N) on host_threads() threads. Throws input_error for depth
// outside [0, 21], per_leaf < 1, or more than 2^31 - 1 points.
octree build_complete_octree(int depth, int per_leaf, std::uint64_t seed);

// Checks the layout invariants; throws invariant_error naming the first offending node:
// array sizes agree; level_offset starts {0, 1} (one root) and has non-empty levels up to depth
// <= 21; level[n] matches; children of a level's nodes are the next level, contiguous, in order,
// with parent links back; child ranges tile the parent's point range; only the root of an empty
// tree is empty; leaves lists every leaf once, in Morton order, tiling all points (so each point is
// in exactly one leaf); cells are cubes, each child cell is one octant of its parent's cell (in
// increasing octant order), and each leaf cell contains its points (to 1e-9 of the root edge plus
// 64 ulps of the coordinates' magnitude: the rounding of double cell bounds).
void check_invariants(const octree& tree);

// Where two builds of the same points differ in structure or point ranges: "" when they are the
// same tree, else the first differing array and index ("point_begin[10] differs"). Compares
// parent, first_child, child_count, point_begin, point_count, leaves and level_offset (how the GPU
// builder is checked against build_octree by the tool and the benchmark).
std::string structure_difference(const octree& a, const octree& b);

}  // namespace canopy::trees
