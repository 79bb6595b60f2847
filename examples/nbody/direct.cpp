// SPDX-License-Identifier: Apache-2.0
#include "direct.hpp"

#include <cmath>

#include "force_backend.hpp"

namespace nbody {

std::vector<direct_force> direct_forces(std::span<const canopy::trees::point> bodies,
                                        std::span<const std::int32_t> targets, double eps2, unsigned threads) {
  std::vector<direct_force> out(targets.size());
  parallel_for(targets.size(), threads, 16, [&](std::size_t b, std::size_t e) {
    for (std::size_t k = b; k < e; ++k) {
      const std::int32_t i = targets[k];
      const double x = bodies[i].x, y = bodies[i].y, z = bodies[i].z;
      double ax = 0, ay = 0, az = 0, phi = 0;
      for (std::size_t j = 0; j < bodies.size(); ++j) {
        if (static_cast<std::int32_t>(j) == i) continue;
        const double dx = bodies[j].x - x, dy = bodies[j].y - y, dz = bodies[j].z - z;
        const double inv_r = 1.0 / std::sqrt(dx * dx + dy * dy + dz * dz + eps2);
        const double w = bodies[j].m * inv_r * inv_r * inv_r;
        ax += w * dx;
        ay += w * dy;
        az += w * dz;
        phi -= bodies[j].m * inv_r;
      }
      out[k] = direct_force{ax, ay, az, phi};
    }
  });
  return out;
}

double direct_potential_energy(std::span<const canopy::trees::point> bodies, double eps2, unsigned threads) {
  const std::size_t n = bodies.size();
  constexpr std::size_t chunk = 64;
  std::vector<double> partial((n + chunk - 1) / chunk, 0.0);
  // Row i pairs with j > i; chunks of rows are handed out dynamically (early rows are longer).
  parallel_for(n, threads, chunk, [&](std::size_t b, std::size_t e) {
    double w = 0;
    for (std::size_t i = b; i < e; ++i) {
      const double x = bodies[i].x, y = bodies[i].y, z = bodies[i].z;
      double row = 0;
      for (std::size_t j = i + 1; j < n; ++j) {
        const double dx = bodies[j].x - x, dy = bodies[j].y - y, dz = bodies[j].z - z;
        row += bodies[j].m / std::sqrt(dx * dx + dy * dy + dz * dz + eps2);
      }
      w -= bodies[i].m * row;
    }
    partial[b / chunk] = w;
  });
  double w = 0;
  for (double p : partial) w += p;
  return w;
}

}  // namespace nbody
