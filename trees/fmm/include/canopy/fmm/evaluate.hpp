// SPDX-License-Identifier: Apache-2.0
// The whole FMM on the CPU, serial and straightforward: the reference the GPU task graph will be
// checked against. Phases, in the order their dependencies allow:
//   P2M at the leaves, M2M up the levels          (multipoles, deepest level first)
//   M2L into every target from its list            (needs the sources' multipoles)
//   L2L down the levels                            (a node's local = its M2L + its parent's, shifted)
//   L2P and P2P at the leaves                      (far field + near field per point)
#pragma once

#include <canopy/fmm/expansion.hpp>
#include <canopy/fmm/interaction_lists.hpp>
#include <canopy/fmm/kernels.hpp>
#include <canopy/trees/octree.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace canopy::fmm {

struct fmm_options {
  double theta = 0.5;  // opening parameter of the acceptance criterion, in (0, 1]
  double eps2 = 0.0;   // Plummer softening squared, in the near and the far field alike
};

template <class T>
frame<T> frame_of(const cell_geometry& g) {
  return frame<T>{{T(g.center[0]), T(g.center[1]), T(g.center[2])}, T(g.scale)};
}

namespace detail {
// P2M at the leaves and M2M up, deepest level first, so every child is complete before its parent
// reads it: the upward pass evaluate and evaluate_points share.
template <class T, int P>
std::vector<multipole_expansion<T, P>> upward_multipoles(const trees::octree& tree, const std::vector<frame<T>>& frames) {
  std::vector<multipole_expansion<T, P>> multipoles(frames.size());
  for (int level = tree.depth; level >= 0; --level) {
    for (std::int32_t n = tree.level_offset[static_cast<std::size_t>(level)];
         n < tree.level_offset[static_cast<std::size_t>(level) + 1]; ++n) {
      const auto i = static_cast<std::size_t>(n);
      set_zero(multipoles[i]);
      if (tree.is_leaf(n)) {
        p2m(tree.points.data() + tree.point_begin[i], tree.point_count[i], frames[i], multipoles[i]);
      } else {
        for (std::int32_t c = tree.first_child[i]; c < tree.first_child[i] + tree.child_count[i]; ++c)
          m2m(multipoles[static_cast<std::size_t>(c)], frames[static_cast<std::size_t>(c)], frames[i], multipoles[i]);
      }
    }
  }
  return multipoles;
}
}  // namespace detail

// Potential and acceleration of every point of tree.points (the tree's Morton order), from all
// the others, with the given geometry and lists (compute_cell_geometry, build_interaction_lists).
template <class T, int P>
std::vector<field<T>> evaluate(const trees::octree& tree, std::span<const cell_geometry> geometry,
                               const interaction_lists& lists, double eps2) {
  static_assert(P >= min_order && P <= max_order, "order outside the tested range 2..8");
  const std::int32_t nodes = tree.node_count();
  if (geometry.size() != static_cast<std::size_t>(nodes) || lists.m2l_offset.size() != static_cast<std::size_t>(nodes) + 1 ||
      lists.p2p_offset.size() != static_cast<std::size_t>(nodes) + 1)
    throw std::invalid_argument("fmm::evaluate: geometry or lists are not of this tree (" + std::to_string(nodes) + " nodes)");
  const T e2 = T(eps2);
  std::vector<frame<T>> frames(static_cast<std::size_t>(nodes));
  for (std::int32_t n = 0; n < nodes; ++n) frames[static_cast<std::size_t>(n)] = frame_of<T>(geometry[static_cast<std::size_t>(n)]);

  // Upward: deepest level first, so every child is complete before its parent reads it.
  const std::vector<multipole_expansion<T, P>> multipoles = detail::upward_multipoles<T, P>(tree, frames);

  // Far field: every target's own translations.
  std::vector<local_expansion<T, P>> locals(static_cast<std::size_t>(nodes));
  for (std::int32_t n = 0; n < nodes; ++n) {
    const auto i = static_cast<std::size_t>(n);
    set_zero(locals[i]);
    for (std::int32_t k = lists.m2l_offset[i]; k < lists.m2l_offset[i + 1]; ++k) {
      const auto s = static_cast<std::size_t>(lists.m2l_source[static_cast<std::size_t>(k)]);
      m2l(multipoles[s], frames[s], frames[i], e2, locals[i]);
    }
  }

  // Downward: level order puts every parent before its children.
  for (std::int32_t n = 1; n < nodes; ++n) {
    const auto i = static_cast<std::size_t>(n);
    const auto parent = static_cast<std::size_t>(tree.parent[i]);
    l2l(locals[parent], frames[parent], frames[i], locals[i]);
  }

  // Leaves: the local expansion at each point, plus the near field of the listed leaves.
  std::vector<field<T>> out(tree.points.size());
  for (const std::int32_t leaf : tree.leaves) {
    const auto i = static_cast<std::size_t>(leaf);
    const std::int32_t begin = tree.point_begin[i], end = begin + tree.point_count[i];
    for (std::int32_t j = begin; j < end; ++j) {
      const trees::point& q = tree.points[static_cast<std::size_t>(j)];
      field<T> f = l2p(locals[i], frames[i], T(q.x), T(q.y), T(q.z));
      for (std::int32_t k = lists.p2p_offset[i]; k < lists.p2p_offset[i + 1]; ++k) {
        const auto s = static_cast<std::size_t>(lists.p2p_source[static_cast<std::size_t>(k)]);
        const std::int32_t sb = tree.point_begin[s];
        p2p(tree.points.data() + sb, tree.point_count[s], static_cast<std::int32_t>(s) == leaf ? j - sb : -1, e2, T(q.x),
            T(q.y), T(q.z), f);
      }
      out[static_cast<std::size_t>(j)] = f;
    }
  }
  return out;
}

// The field of the points tree.points[i] for i in `which` only, with the arithmetic of evaluate
// in the same order (so bit for bit its values at those points): every multipole, but M2L and L2L
// only into the ancestors of the listed points' leaves. How a benchmark checks a large GPU result
// on a sample of its points (1M points at P = 8: every M2L would take minutes, a sample's seconds).
// Throws std::invalid_argument for an index outside the points or foreign geometry or lists.
template <class T, int P>
std::vector<field<T>> evaluate_points(const trees::octree& tree, std::span<const cell_geometry> geometry,
                                      const interaction_lists& lists, double eps2, std::span<const std::int32_t> which) {
  const std::int32_t nodes = tree.node_count();
  if (geometry.size() != static_cast<std::size_t>(nodes) || lists.m2l_offset.size() != static_cast<std::size_t>(nodes) + 1 ||
      lists.p2p_offset.size() != static_cast<std::size_t>(nodes) + 1)
    throw std::invalid_argument("fmm::evaluate_points: geometry or lists are not of this tree");
  const T e2 = T(eps2);
  std::vector<frame<T>> frames(static_cast<std::size_t>(nodes));
  for (std::int32_t n = 0; n < nodes; ++n) frames[static_cast<std::size_t>(n)] = frame_of<T>(geometry[static_cast<std::size_t>(n)]);
  const std::vector<multipole_expansion<T, P>> multipoles = detail::upward_multipoles<T, P>(tree, frames);
  // The leaf of each listed point (leaves are in increasing point_begin), and every ancestor.
  std::vector<std::int32_t> leaf_of(which.size());
  std::vector<std::uint8_t> needed(static_cast<std::size_t>(nodes), 0);
  for (std::size_t k = 0; k < which.size(); ++k) {
    const std::int32_t j = which[k];
    if (j < 0 || static_cast<std::size_t>(j) >= tree.points.size())
      throw std::invalid_argument("fmm::evaluate_points: point " + std::to_string(j) + " of " + std::to_string(tree.points.size()));
    std::size_t lo = 0, hi = tree.leaves.size();  // the last leaf whose point_begin <= j
    while (hi - lo > 1) {
      const std::size_t mid = (lo + hi) / 2;
      if (tree.point_begin[static_cast<std::size_t>(tree.leaves[mid])] <= j) lo = mid;
      else hi = mid;
    }
    leaf_of[k] = tree.leaves[lo];
    for (std::int32_t n = leaf_of[k]; n >= 0 && !needed[static_cast<std::size_t>(n)]; n = tree.parent[static_cast<std::size_t>(n)])
      needed[static_cast<std::size_t>(n)] = 1;
  }
  // Locals of the needed nodes, as evaluate forms them: the M2L sum, then the parent's L2L added.
  std::vector<local_expansion<T, P>> locals(static_cast<std::size_t>(nodes));
  for (std::int32_t n = 0; n < nodes; ++n) {
    const auto i = static_cast<std::size_t>(n);
    if (!needed[i]) continue;
    set_zero(locals[i]);
    for (std::int32_t k = lists.m2l_offset[i]; k < lists.m2l_offset[i + 1]; ++k) {
      const auto s = static_cast<std::size_t>(lists.m2l_source[static_cast<std::size_t>(k)]);
      m2l(multipoles[s], frames[s], frames[i], e2, locals[i]);
    }
    if (n > 0) {
      const auto parent = static_cast<std::size_t>(tree.parent[i]);
      l2l(locals[parent], frames[parent], frames[i], locals[i]);
    }
  }
  std::vector<field<T>> out(which.size());
  for (std::size_t k = 0; k < which.size(); ++k) {
    const auto i = static_cast<std::size_t>(leaf_of[k]);
    const std::int32_t j = which[k];
    const trees::point& q = tree.points[static_cast<std::size_t>(j)];
    field<T> f = l2p(locals[i], frames[i], T(q.x), T(q.y), T(q.z));
    for (std::int32_t e = lists.p2p_offset[i]; e < lists.p2p_offset[i + 1]; ++e) {
      const auto s = static_cast<std::size_t>(lists.p2p_source[static_cast<std::size_t>(e)]);
      const std::int32_t sb = tree.point_begin[s];
      p2p(tree.points.data() + sb, tree.point_count[s], static_cast<std::int32_t>(s) == leaf_of[k] ? j - sb : -1, e2, T(q.x),
          T(q.y), T(q.z), f);
    }
    out[k] = f;
  }
  return out;
}

// The same, building the geometry and the lists of options.theta first.
template <class T, int P>
std::vector<field<T>> evaluate(const trees::octree& tree, const fmm_options& options) {
  const std::vector<cell_geometry> geometry = compute_cell_geometry(tree);
  const interaction_lists lists = build_interaction_lists(tree, geometry, options.theta);
  return evaluate<T, P>(tree, geometry, lists, options.eps2);
}

// The order chosen at run time (2..8); throws std::invalid_argument outside that range.
template <class T>
std::vector<field<T>> evaluate(int order, const trees::octree& tree, const fmm_options& options) {
  switch (order) {
    case 2: return evaluate<T, 2>(tree, options);
    case 3: return evaluate<T, 3>(tree, options);
    case 4: return evaluate<T, 4>(tree, options);
    case 5: return evaluate<T, 5>(tree, options);
    case 6: return evaluate<T, 6>(tree, options);
    case 7: return evaluate<T, 7>(tree, options);
    case 8: return evaluate<T, 8>(tree, options);
    default: throw std::invalid_argument("fmm::evaluate: order must be in 2..8, not " + std::to_string(order));
  }
}

}  // namespace canopy::fmm
