// SPDX-License-Identifier: Apache-2.0
// The CPU reference of the upward pass, and the comparison every benchmarked result must pass
// before its time counts.
#pragma once

#include <canopy/trees/multipole.hpp>
#include <canopy/trees/octree.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace canopy::trees {

// Serial, double precision, bottom-up by levels: leaves p2m over their points, every internal
// node m2m_merge of its children in order. One payload per node, indexed by node id.
std::vector<multipole<double>> reference_upward_pass(const octree& tree);

// Each node's moments straight from its whole point range (p2m in double), no merging: the oracle
// for the merge itself. O(N * depth).
std::vector<multipole<double>> brute_force_moments(const octree& tree);

// Worst error of one quantity over all nodes, normalised as described in `comparison`.
struct quantity_error {
  double worst = 0.0;      // largest normalised error (+inf for NaN or a mismatch that cannot be normalised)
  std::int32_t node = -1;  // where it occurs (-1: every node exact)
  double bound = 0.0;      // tolerance; worst <= bound is required
  bool within() const { return worst <= bound; }
};

// Result of compare_payloads. Counts must match exactly. Each float quantity is normalised so
// that one bound per quantity holds for every node:
//   mass:  |m - m_ref| / m_ref                            (0 if both are 0, +inf if only m_ref is)
//   com:   max_i |c_i - c_ref_i| / L                       with L = edge + max |coordinate| of the node's cell
//   m2:    max_ij |m2_ij - m2_ref_ij| / (m_ref L^2)        (massless node: m2 must be exactly 0)
//   bbox:  max_i of |lo_i - lo_ref_i|, |hi_i - hi_ref_i|, divided by the edge
// L contains |x| because float coordinates carry an absolute rounding of u|x|: a deep cell far from
// the origin cannot have a com better than that, whatever its edge.
//
// Bounds, from the standard error bound of recursive summation of n terms, (n-1) u
// (Higham, Accuracy and Stability, sec. 4.2), first order in the unit roundoff u of T (2^-24 for
// float): every point's contribution to a node passes through at most
//   h = (largest leaf point count) + 7 * depth + 8
// additions (the leaf's sum, then at most 7 merges per level, then a few divisions/shifts), so
//   mass <= 2 h u,  com <= 4 h u  (weighted sum and divided mass, each <= 2 h u X, X <= L),
//   m2   <= 64 h u (products with the rounded com deviation, plus the parallel-axis shifts of every
//                   level below, a geometric series in the halving edge; 64 leaves room for FMA and
//                   any summation order),
//   bbox == 0      (min and max of the same floats are exact in any precision and order).
// For float on a depth-8 complete tree with 8 points per leaf h = 72: mass 8.6e-6, com 1.7e-5,
// m2 2.7e-4 (of m L^2). Any off-by-one child, stale read or lost merge is orders of magnitude above.
// With leaf_summation::blocked (trees::p2m: blocks of p2m_block points, the blocks' sums
// compensated) the leaf's term is min(largest leaf, p2m_block) + 2 instead of the largest leaf.
//
// A bound is only worth checking while it is small: when the mass bound exceeds
// max_meaningful_mass_bound (1e-3: a sequentially summed leaf of more than ~8,000 points) the
// comparison is not within tolerance (bounds_meaningful false), whatever the errors: 8M points in
// one leaf used to PASS with 4% of the mass missing, under a bound of 95%.
enum class leaf_summation {
  sequential,  // any order, one running sum (per lane): the GPU's group_p2m, and the default
  blocked,     // trees::p2m, which the CPU backend and the reference use
};
inline constexpr double max_meaningful_mass_bound = 1e-3;

struct comparison {
  bool counts_match = true;
  bool bounds_meaningful = true;           // the mass bound is at most max_meaningful_mass_bound
  std::int32_t first_count_mismatch = -1;  // node, or -1
  quantity_error mass, com, m2, bbox;
  bool within_tolerance = true;  // counts_match and every quantity within its bound
  std::string summary() const;   // one line: "counts ok, mass 1.2e-07 (node 5, bound 8.6e-06), ..."
};

// Compares computed payloads (one per node, in node order) with the reference (double, as from
// reference_upward_pass). Throws std::invalid_argument when either span's size is not the node count.
template <class T>
comparison compare_payloads(const octree& tree, std::span<const multipole<T>> computed,
                            std::span<const multipole<double>> reference,
                            leaf_summation leaves = leaf_summation::sequential);

extern template comparison compare_payloads<float>(const octree&, std::span<const multipole<float>>,
                                                   std::span<const multipole<double>>, leaf_summation);
extern template comparison compare_payloads<double>(const octree&, std::span<const multipole<double>>,
                                                    std::span<const multipole<double>>, leaf_summation);

}  // namespace canopy::trees
