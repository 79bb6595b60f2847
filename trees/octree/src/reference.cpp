// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/reference.hpp>

#include "parallel.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

namespace canopy::trees {

std::vector<multipole<double>> reference_upward_pass(const octree& tree) {
  std::vector<multipole<double>> out(static_cast<std::size_t>(tree.node_count()));
  for (int l = tree.depth; l >= 0; --l) {
    for (std::int32_t n = tree.level_offset[l]; n < tree.level_offset[l + 1]; ++n) {
      if (tree.is_leaf(n)) {
        out[n] = p2m<double>(tree.points.data() + tree.point_begin[n], tree.point_count[n]);
        continue;
      }
      multipole<double> acc = multipole_identity<double>();
      for (std::int32_t c = tree.first_child[n]; c < tree.first_child[n] + tree.child_count[n]; ++c) {
        acc = m2m_merge(acc, out[c]);
      }
      out[n] = acc;
    }
  }
  return out;
}

std::vector<multipole<double>> brute_force_moments(const octree& tree) {
  std::vector<multipole<double>> out(static_cast<std::size_t>(tree.node_count()));
  // Nodes are independent, so threads change nothing but the time (this is O(N * depth)).
  detail::parallel_chunks(out.size(), 256, [&](std::size_t b, std::size_t e) {
    for (std::size_t n = b; n < e; ++n) out[n] = p2m<double>(tree.points.data() + tree.point_begin[n], tree.point_count[n]);
  });
  return out;
}

namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

// |a - b|, with equal values (infinities included) giving 0 and NaN anywhere giving +inf, so a
// poisoned payload can never compare as "within" through NaN's false comparisons.
double difference(double a, double b) {
  if (a == b) return 0.0;
  const double d = std::abs(a - b);
  return std::isnan(d) ? infinity : d;
}

void record(quantity_error& q, double error, std::int32_t node) {
  if (std::isnan(error)) error = infinity;
  if (error > q.worst) {
    q.worst = error;
    q.node = node;
  }
}

}  // namespace

std::string comparison::summary() const {
  char buf[512];
  auto part = [](const char* name, const quantity_error& q) {
    char p[128];
    std::snprintf(p, sizeof p, "%s %.3g (node %d, bound %.3g)%s", name, q.worst, q.node, q.bound,
                  q.within() ? "" : " EXCEEDED");
    return std::string(p);
  };
  if (!bounds_meaningful) {
    std::snprintf(buf, sizeof buf, "the mass bound %.3g exceeds %.3g: a leaf too large to check (NOT within tolerance)",
                  mass.bound, max_meaningful_mass_bound);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "counts %s, %s, %s, %s, %s: %s",
                counts_match ? "ok" : ("differ from node " + std::to_string(first_count_mismatch)).c_str(),
                part("mass", mass).c_str(), part("com", com).c_str(), part("m2", m2).c_str(), part("bbox", bbox).c_str(),
                within_tolerance ? "within tolerance" : "NOT within tolerance");
  return buf;
}

template <class T>
comparison compare_payloads(const octree& tree, std::span<const multipole<T>> computed,
                            std::span<const multipole<double>> reference, leaf_summation leaves) {
  const std::size_t nodes = static_cast<std::size_t>(tree.node_count());
  if (computed.size() != nodes || reference.size() != nodes) {
    throw std::invalid_argument("compare_payloads: " + std::to_string(computed.size()) + " computed and " +
                                std::to_string(reference.size()) + " reference payloads for " + std::to_string(nodes) +
                                " nodes");
  }
  // The bounds and their derivation are in reference.hpp, next to `comparison`.
  const double u = static_cast<double>(std::numeric_limits<T>::epsilon()) / 2.0;
  std::int32_t largest_leaf = 0;
  for (const std::int32_t leaf : tree.leaves) largest_leaf = std::max(largest_leaf, tree.point_count[leaf]);
  const std::int32_t leaf_terms =
      leaves == leaf_summation::blocked ? std::min(largest_leaf, p2m_block) + 2 : largest_leaf;
  const double h = static_cast<double>(leaf_terms) + 7.0 * tree.depth + 8.0;

  comparison c;
  c.mass.bound = 2.0 * h * u;
  c.com.bound = 4.0 * h * u;
  c.m2.bound = 64.0 * h * u;
  c.bbox.bound = 0.0;
  for (std::size_t i = 0; i < nodes; ++i) {
    const std::int32_t n = static_cast<std::int32_t>(i);
    const multipole<T>& got = computed[i];
    const multipole<double>& want = reference[i];
    if (got.count != want.count && c.counts_match) {
      c.counts_match = false;
      c.first_count_mismatch = n;
    }
    const box& cell = tree.bounds[i];
    const double edge = cell.hi[0] - cell.lo[0];
    double magnitude = 0.0;
    for (int a = 0; a < 3; ++a) magnitude = std::max({magnitude, std::abs(cell.lo[a]), std::abs(cell.hi[a])});
    const double scale = edge + magnitude;  // L in reference.hpp

    const double mass_diff = difference(static_cast<double>(got.mass), want.mass);
    record(c.mass, want.mass > 0.0 ? mass_diff / want.mass : (mass_diff == 0.0 ? 0.0 : infinity), n);

    double com_diff = 0.0, bbox_diff = 0.0, m2_diff = 0.0;
    for (int a = 0; a < 3; ++a) {
      com_diff = std::max(com_diff, difference(static_cast<double>(got.com[a]), want.com[a]));
      bbox_diff = std::max({bbox_diff, difference(static_cast<double>(got.lo[a]), want.lo[a]),
                            difference(static_cast<double>(got.hi[a]), want.hi[a])});
    }
    for (int k = 0; k < 6; ++k) m2_diff = std::max(m2_diff, difference(static_cast<double>(got.m2[k]), want.m2[k]));
    record(c.com, com_diff / scale, n);
    record(c.bbox, bbox_diff / edge, n);
    record(c.m2, want.mass > 0.0 ? m2_diff / (want.mass * scale * scale) : (m2_diff == 0.0 ? 0.0 : infinity), n);
  }
  c.bounds_meaningful = c.mass.bound <= max_meaningful_mass_bound;
  c.within_tolerance = c.bounds_meaningful && c.counts_match && c.mass.within() && c.com.within() && c.m2.within() && c.bbox.within();
  return c;
}

template comparison compare_payloads<float>(const octree&, std::span<const multipole<float>>,
                                            std::span<const multipole<double>>, leaf_summation);
template comparison compare_payloads<double>(const octree&, std::span<const multipole<double>>,
                                             std::span<const multipole<double>>, leaf_summation);

}  // namespace canopy::trees
