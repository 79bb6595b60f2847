// SPDX-License-Identifier: Apache-2.0
// O(N^2) direct summation in double precision: the oracle for the tree walk's accelerations and
// the exact potential energy for the energy-drift check. Host threads; meant for small N (or a
// sample of bodies against all N).
#pragma once

#include <canopy/trees/point.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace nbody {

struct direct_force {
  double ax, ay, az, phi;
};

// Softened force on each body of `targets` (indices into `bodies`) from all other bodies.
std::vector<direct_force> direct_forces(std::span<const canopy::trees::point> bodies,
                                        std::span<const std::int32_t> targets, double eps2, unsigned threads);

// Potential energy W = -sum_{i<j} m_i m_j / sqrt(r_ij^2 + eps^2).
double direct_potential_energy(std::span<const canopy::trees::point> bodies, double eps2, unsigned threads);

}  // namespace nbody
