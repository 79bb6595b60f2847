// SPDX-License-Identifier: Apache-2.0
// The FMM's interaction lists over the adaptive octree (canopy/trees/octree.hpp), on the host: the
// cells' expansion frames and radii, and a dual tree traversal (Dehnen 2002, sec. 3; the same
// traversal as exaFMM's) that splits every (target cell, source cell) pair until the pair is well
// separated (M2L) or both are leaves (P2P). The lists come out as CSR arrays indexed by node id,
// so a device pass can later read them as they are.
#pragma once

#include <canopy/fmm/detail/geometry_ops.hpp>
#include <canopy/trees/octree.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace canopy::fmm {

// Where a node's expansions live and how far its points reach.
struct cell_geometry {
  double center[3];  // expansion centre: the centre of mass (the cell's centre when massless)
  double scale;      // length scale of the expansions' coefficients: half the cell's edge
  double radius;     // largest distance from center to the node's points (0 for one point)
};

// Geometry of every node of `tree`, by node id, in double. The centre of mass makes the dipole
// vanish, and the exact radius (not the cell's half-diagonal) lets the opening criterion accept
// pairs sooner where points are clustered in a corner of their cell. The mass sums go up the tree
// (detail/geometry_ops.hpp says why); the radius is the largest distance over the node's own
// points, O(points x depth). The device build (device_lists.hpp) gives the same bits.
inline std::vector<cell_geometry> compute_cell_geometry(const trees::octree& tree) {
  const std::int32_t nodes = tree.node_count();
  std::vector<cell_geometry> g(static_cast<std::size_t>(nodes));
  std::vector<detail::mass_sums> sums(static_cast<std::size_t>(nodes), detail::mass_sums{0, 0, 0, 0});
  // Level order numbers every child after its parent: descending ids see the children first.
  for (std::int32_t n = nodes - 1; n >= 0; --n) {
    const auto i = static_cast<std::size_t>(n);
    detail::mass_sums& s = sums[i];
    if (tree.is_leaf(n)) {
      for (std::int32_t j = tree.point_begin[i]; j < tree.point_begin[i] + tree.point_count[i]; ++j)
        detail::add_point(s, tree.points[static_cast<std::size_t>(j)]);
    } else {
      for (std::int32_t c = tree.first_child[i]; c < tree.first_child[i] + tree.child_count[i]; ++c)
        detail::add_sums(s, sums[static_cast<std::size_t>(c)]);
    }
  }
  for (std::int32_t n = 0; n < nodes; ++n) {
    const auto i = static_cast<std::size_t>(n);
    const trees::box& b = tree.bounds[i];
    cell_geometry& cg = g[i];
    detail::center_of(sums[i], b, cg.center);
    cg.scale = 0.5 * (b.hi[0] - b.lo[0]);
    double r2 = 0;
    for (std::int32_t j = tree.point_begin[i]; j < tree.point_begin[i] + tree.point_count[i]; ++j) {
      const double d2 = detail::distance2(tree.points[static_cast<std::size_t>(j)], cg.center);
      if (d2 > r2) r2 = d2;
    }
    cg.radius = std::sqrt(r2);
  }
  return g;
}

// Per-target source lists in CSR form, indexed by node id: the M2L sources of target t are
// m2l_source[m2l_offset[t], m2l_offset[t+1]) (any node may have some), the P2P sources of leaf t
// are p2p_source[p2p_offset[t], p2p_offset[t+1]) (leaves only; a leaf lists itself). Within a
// target, sources are in the traversal's order.
struct interaction_lists {
  std::vector<std::int32_t> m2l_offset;  // node_count + 1 entries
  std::vector<std::int32_t> m2l_source;
  std::vector<std::int32_t> p2p_offset;  // node_count + 1 entries
  std::vector<std::int32_t> p2p_source;
};

// The multipole acceptance criterion (Dehnen 2002, eq. 12 with the points' radii): target A and
// source B interact through M2L when
//   r_A + r_B < theta |z_A - z_B|.
// For theta <= 1 every point of B is then farther from z_A than every point of A is (and the other
// way round), which the Taylor series of both expansions need to converge; their error falls like
// theta^(P+1).
inline bool well_separated(const cell_geometry& a, const cell_geometry& b, double theta) {
  return detail::separated(a.center, a.radius, b.center, b.radius, theta);
}

namespace detail {
inline std::pair<std::vector<std::int32_t>, std::vector<std::int32_t>> to_csr(
    std::int32_t nodes, const std::vector<std::pair<std::int32_t, std::int32_t>>& pairs) {
  std::vector<std::int32_t> offset(static_cast<std::size_t>(nodes) + 1, 0);
  for (const auto& [t, s] : pairs) ++offset[static_cast<std::size_t>(t) + 1];
  for (std::size_t i = 1; i < offset.size(); ++i) offset[i] += offset[i - 1];
  std::vector<std::int32_t> source(pairs.size());
  std::vector<std::int32_t> fill(offset.begin(), offset.end() - 1);
  for (const auto& [t, s] : pairs) source[static_cast<std::size_t>(fill[static_cast<std::size_t>(t)]++)] = s;
  return {std::move(offset), std::move(source)};
}
}  // namespace detail

// Dual tree traversal from (root, root), with an explicit stack of (target, source) pairs:
//   well separated (and not the same node)  -> M2L (source into target)
//   both leaves                             -> P2P
//   the same node                           -> every pair of its children
//   otherwise                               -> split the one with the larger radius (never a leaf)
// Every (target point, source point) pair, the point with itself included, is covered by exactly
// one M2L of an ancestor-or-self of its target leaf or one P2P of that leaf (the test checks it).
// Throws std::invalid_argument unless 0 < theta <= 1, or when geometry's size is not the tree's.
inline interaction_lists build_interaction_lists(const trees::octree& tree, std::span<const cell_geometry> geometry,
                                                 double theta) {
  if (!(theta > 0.0 && theta <= 1.0))
    throw std::invalid_argument("build_interaction_lists: theta must be in (0, 1], not " + std::to_string(theta));
  const std::int32_t nodes = tree.node_count();
  if (geometry.size() != static_cast<std::size_t>(nodes))
    throw std::invalid_argument("build_interaction_lists: geometry has " + std::to_string(geometry.size()) +
                                " cells for a tree of " + std::to_string(nodes) + " nodes");
  std::vector<std::pair<std::int32_t, std::int32_t>> m2l, p2p;
  std::vector<std::pair<std::int32_t, std::int32_t>> stack;
  if (nodes > 0) stack.emplace_back(0, 0);
  const auto children = [&](std::int32_t n) {
    const auto i = static_cast<std::size_t>(n);
    return std::pair<std::int32_t, std::int32_t>(tree.first_child[i], tree.first_child[i] + tree.child_count[i]);
  };
  while (!stack.empty()) {
    const auto [a, b] = stack.back();
    stack.pop_back();
    const cell_geometry& ga = geometry[static_cast<std::size_t>(a)];
    const cell_geometry& gb = geometry[static_cast<std::size_t>(b)];
    const bool leaf_a = tree.is_leaf(a), leaf_b = tree.is_leaf(b);
    if (a != b && well_separated(ga, gb, theta)) {
      m2l.emplace_back(a, b);
    } else if (leaf_a && leaf_b) {
      p2p.emplace_back(a, b);
    } else if (a == b) {
      const auto [first, last] = children(a);
      // Pushed in reverse so that pairs pop in Morton order (deterministic lists, and nearby
      // sources next to each other in a target's list).
      for (std::int32_t ca = last - 1; ca >= first; --ca)
        for (std::int32_t cb = last - 1; cb >= first; --cb) stack.emplace_back(ca, cb);
    } else if (leaf_b || (!leaf_a && ga.radius >= gb.radius)) {
      const auto [first, last] = children(a);
      for (std::int32_t ca = last - 1; ca >= first; --ca) stack.emplace_back(ca, b);
    } else {
      const auto [first, last] = children(b);
      for (std::int32_t cb = last - 1; cb >= first; --cb) stack.emplace_back(a, cb);
    }
  }
  interaction_lists lists;
  std::tie(lists.m2l_offset, lists.m2l_source) = detail::to_csr(nodes, m2l);
  std::tie(lists.p2p_offset, lists.p2p_source) = detail::to_csr(nodes, p2p);
  return lists;
}

// Sorts each target's sources by id, in place: the canonical form of a list, independent of the
// traversal's order. The device build (device_lists.hpp) emits its lists in this form, so the
// host's lists sorted this way are equal to the device's array for array, and an evaluation over
// either sums its sources in the same order.
inline void sort_sources(interaction_lists& lists) {
  const auto sort_rows = [](const std::vector<std::int32_t>& offset, std::vector<std::int32_t>& source) {
    for (std::size_t t = 0; t + 1 < offset.size(); ++t)
      std::sort(source.begin() + offset[t], source.begin() + offset[t + 1]);
  };
  sort_rows(lists.m2l_offset, lists.m2l_source);
  sort_rows(lists.p2p_offset, lists.p2p_source);
}

}  // namespace canopy::fmm
