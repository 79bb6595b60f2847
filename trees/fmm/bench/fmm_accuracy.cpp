// SPDX-License-Identifier: Apache-2.0
// The FMM's accuracy against direct summation: relative acceleration and potential errors (p50,
// p99 over every point) for each order and opening parameter, on Plummer and uniform points.
// Prints the markdown table of docs/FMM.md (bench/results/cpu/fmm/accuracy.md).
//
//   canopy_fmm_accuracy [points (4000)] [seed (1)]
#include <canopy/fmm/evaluate.hpp>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/octree.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

namespace cf = canopy::fmm;
namespace ct = canopy::trees;

struct exact_field {
  double ax, ay, az, phi;
};

// Softened direct sum over all pairs, in double (examples/nbody/direct.cpp's convention).
std::vector<exact_field> direct(const std::vector<ct::point>& p, double eps2) {
  std::vector<exact_field> out(p.size(), exact_field{0, 0, 0, 0});
  for (std::size_t i = 0; i < p.size(); ++i)
    for (std::size_t j = 0; j < p.size(); ++j) {
      if (i == j) continue;
      const double dx = double(p[j].x) - p[i].x, dy = double(p[j].y) - p[i].y, dz = double(p[j].z) - p[i].z;
      const double inv_r = 1.0 / std::sqrt(dx * dx + dy * dy + dz * dz + eps2);
      const double w = p[j].m * inv_r * inv_r * inv_r;
      out[i].ax += w * dx;
      out[i].ay += w * dy;
      out[i].az += w * dz;
      out[i].phi -= p[j].m * inv_r;
    }
  return out;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const auto r = static_cast<std::size_t>(std::ceil(q / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, r == 0 ? 0 : r - 1)];
}

struct errors {
  double acc50, acc99, phi50, phi99;
};

template <class T>
errors errors_of(const std::vector<cf::field<T>>& got, const std::vector<exact_field>& want) {
  std::vector<double> acc(got.size()), phi(got.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double ex = double(got[i].ax) - want[i].ax, ey = double(got[i].ay) - want[i].ay, ez = double(got[i].az) - want[i].az;
    acc[i] = std::sqrt(ex * ex + ey * ey + ez * ez) /
             std::sqrt(want[i].ax * want[i].ax + want[i].ay * want[i].ay + want[i].az * want[i].az);
    phi[i] = std::abs(double(got[i].phi) - want[i].phi) / std::abs(want[i].phi);
  }
  return {percentile(acc, 50), percentile(acc, 99), percentile(phi, 50), percentile(phi, 99)};
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 4000;
  const std::uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  const double eps2 = 1e-4;  // softening 0.01, examples/nbody's default
  const ct::build_options build{};  // max_leaf 32
  std::printf("# FMM accuracy against direct summation (double), %zu points, seed %llu, softening eps^2 = %g, "
              "max_leaf %d\n",
              n, static_cast<unsigned long long>(seed), eps2, build.max_leaf);
  std::printf("# relative errors over every point: |a - a_direct| / |a_direct| and |phi - phi_direct| / |phi_direct|;\n");
  std::printf("# float: the same evaluation with float expansions (T = float); M2L, P2P: the lists' lengths\n");
  for (const char* dist : {"plummer", "uniform"}) {
    const std::vector<ct::point> pts =
        std::string(dist) == "plummer" ? ct::generate_plummer(n, seed) : ct::generate_uniform(n, seed);
    const ct::octree tree = ct::build_octree(pts, build);
    const std::vector<exact_field> exact = direct(tree.points, eps2);
    const std::vector<cf::cell_geometry> geometry = cf::compute_cell_geometry(tree);
    std::printf("\n## %s, %d nodes, %zu leaves, depth %d\n\n", dist, tree.node_count(), tree.leaves.size(), tree.depth);
    std::printf("| p | theta | acc p50 | acc p99 | phi p50 | phi p99 | float acc p50 | float acc p99 | M2L | P2P pairs | ms (double) |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const int p : {2, 4, 6, 8}) {
      for (const double theta : {0.3, 0.5, 0.7}) {
        const cf::interaction_lists lists = cf::build_interaction_lists(tree, geometry, theta);
        std::size_t pairs = 0;
        for (const std::int32_t leaf : tree.leaves)
          for (std::int32_t k = lists.p2p_offset[static_cast<std::size_t>(leaf)]; k < lists.p2p_offset[static_cast<std::size_t>(leaf) + 1]; ++k)
            pairs += static_cast<std::size_t>(tree.point_count[static_cast<std::size_t>(leaf)]) *
                     static_cast<std::size_t>(tree.point_count[static_cast<std::size_t>(lists.p2p_source[static_cast<std::size_t>(k)])]);
        const cf::fmm_options o{theta, eps2};
        const auto t0 = std::chrono::steady_clock::now();
        const auto d = cf::evaluate<double>(p, tree, o);
        const auto t1 = std::chrono::steady_clock::now();
        const auto f = cf::evaluate<float>(p, tree, o);
        const errors ed = errors_of(d, exact), ef = errors_of(f, exact);
        std::printf("| %d | %.1f | %.2e | %.2e | %.2e | %.2e | %.2e | %.2e | %zu | %zu | %.0f |\n", p, theta, ed.acc50, ed.acc99,
                    ed.phi50, ed.phi99, ef.acc50, ef.acc99, lists.m2l_source.size(), pairs,
                    std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
    }
  }
  return 0;
}
