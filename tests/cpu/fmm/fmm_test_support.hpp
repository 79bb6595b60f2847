// SPDX-License-Identifier: Apache-2.0
// Direct sums and random clusters for the FMM tests.
#pragma once

#include <canopy/fmm/expansion.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/point.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace fmm_test {

namespace ct = canopy::trees;
namespace cf = canopy::fmm;

// The softened field of `sources` at (x, y, z) in double, skipping index `skip` (examples/nbody's
// direct.cpp convention).
inline cf::field<double> direct_field(std::span<const ct::point> sources, double x, double y, double z, double eps2,
                                      std::ptrdiff_t skip = -1) {
  cf::field<double> f{0, 0, 0, 0};
  for (std::size_t j = 0; j < sources.size(); ++j) {
    if (static_cast<std::ptrdiff_t>(j) == skip) continue;
    const double dx = sources[j].x - x, dy = sources[j].y - y, dz = sources[j].z - z;
    const double inv_r = 1.0 / std::sqrt(dx * dx + dy * dy + dz * dz + eps2);
    const double w = sources[j].m * inv_r * inv_r * inv_r;
    f.ax += w * dx;
    f.ay += w * dy;
    f.az += w * dz;
    f.phi -= sources[j].m * inv_r;
  }
  return f;
}

// n points uniform in the ball of radius r about c, masses uniform in [0.5, 1.5).
inline std::vector<ct::point> ball(std::size_t n, const double c[3], double r, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0), mass(0.5, 1.5);
  std::vector<ct::point> p;
  while (p.size() < n) {
    const double x = u(rng), y = u(rng), z = u(rng);
    if (x * x + y * y + z * z > 1.0) continue;
    p.push_back(ct::point{float(c[0] + r * x), float(c[1] + r * y), float(c[2] + r * z), float(mass(rng))});
  }
  return p;
}

// |a - b| / |b| for the acceleration, |phi_a - phi_b| / |phi_b| for the potential.
template <class T>
double acceleration_error(const cf::field<T>& a, const cf::field<double>& b) {
  const double ex = double(a.ax) - b.ax, ey = double(a.ay) - b.ay, ez = double(a.az) - b.az;
  return std::sqrt(ex * ex + ey * ey + ez * ez) / std::sqrt(b.ax * b.ax + b.ay * b.ay + b.az * b.az);
}

template <class T>
double potential_error(const cf::field<T>& a, const cf::field<double>& b) {
  return std::abs(double(a.phi) - b.phi) / std::abs(b.phi);
}

// Nearest-rank percentile (examples/nbody's percentiles_of).
inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto r = static_cast<std::size_t>(std::ceil(q / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, r == 0 ? 0 : r - 1)];
}

// The direct-summation field at every point of the tree, each skipping itself: the reference the
// whole-evaluation tests (CPU and GPU) compare with.
inline std::vector<cf::field<double>> direct_all(const ct::octree& tree, double eps2) {
  std::vector<cf::field<double>> out;
  for (std::size_t i = 0; i < tree.points.size(); ++i) {
    const ct::point& p = tree.points[i];
    out.push_back(direct_field(tree.points, p.x, p.y, p.z, eps2, static_cast<std::ptrdiff_t>(i)));
  }
  return out;
}

}  // namespace fmm_test
