// SPDX-License-Identifier: Apache-2.0
// The whole CPU FMM against direct summation over every point: Plummer, uniform and lattice
// points, softened and not, in double and float; errors bounded and falling with the order and
// with theta; and the degenerate trees. The bounds are about 5x the errors measured on these
// points (the table in docs/FMM.md has the figures for 4000 points).
#include <canopy/fmm/evaluate.hpp>
#include <canopy/trees/generators.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "fmm_test_support.hpp"

namespace {

namespace cf = canopy::fmm;
namespace ct = canopy::trees;
using fmm_test::percentile;

struct accuracy {
  double acc50, acc99, phi50, phi99;
};

template <class T>
accuracy accuracy_of(const ct::octree& tree, int order, double theta, double eps2,
                     const std::vector<cf::field<double>>& exact) {
  const std::vector<cf::field<T>> got = cf::evaluate<T>(order, tree, cf::fmm_options{theta, eps2});
  EXPECT_EQ(got.size(), tree.points.size());
  std::vector<double> acc, phi;
  for (std::size_t i = 0; i < got.size(); ++i) {
    acc.push_back(fmm_test::acceleration_error(got[i], exact[i]));
    phi.push_back(fmm_test::potential_error(got[i], exact[i]));
  }
  const accuracy a{percentile(acc, 50), percentile(acc, 99), percentile(phi, 50), percentile(phi, 99)};
  std::printf("%s p %d theta %.1f eps2 %g: acc p50 %.2e p99 %.2e, phi p50 %.2e p99 %.2e\n",
              sizeof(T) == 4 ? "float " : "double", order, theta, eps2, a.acc50, a.acc99, a.phi50, a.phi99);
  return a;
}

TEST(FmmEvaluate, PlummerMatchesDirectSummationAndConvergesWithOrder) {
  const double eps2 = 1e-4;  // examples/nbody's softening 0.01
  const ct::octree tree = ct::build_octree(ct::generate_plummer(3000, 3));
  const auto exact = fmm_test::direct_all(tree, eps2);
  const accuracy p2 = accuracy_of<double>(tree, 2, 0.5, eps2, exact);
  const accuracy p4 = accuracy_of<double>(tree, 4, 0.5, eps2, exact);
  const accuracy p8 = accuracy_of<double>(tree, 8, 0.5, eps2, exact);
  EXPECT_LT(p2.acc50, 3e-2);
  EXPECT_LT(p4.acc50, 1.5e-3);
  EXPECT_LT(p4.acc99, 5e-2);
  EXPECT_LT(p8.acc50, 1.5e-5);
  EXPECT_LT(p8.acc99, 1e-3);
  EXPECT_LT(p8.phi50, 3e-7);
  EXPECT_LT(p8.phi99, 2e-5);
  EXPECT_LT(p4.acc50, 0.2 * p2.acc50);
  EXPECT_LT(p8.acc50, 0.05 * p4.acc50);
  EXPECT_LT(p8.phi50, 0.05 * p4.phi50);
  // Float expansions: the same truncation error until float's rounding (about 1e-6) is reached.
  const accuracy f4 = accuracy_of<float>(tree, 4, 0.5, eps2, exact);
  const accuracy f8 = accuracy_of<float>(tree, 8, 0.3, eps2, exact);
  EXPECT_LT(f4.acc50, 1.1 * p4.acc50);
  EXPECT_LT(f4.acc99, 1.1 * p4.acc99);
  EXPECT_LT(f8.acc50, 3e-6);
  EXPECT_LT(f8.acc99, 2e-5);
}

TEST(FmmEvaluate, UniformWithoutSofteningMatchesDirectSummationAndConvergesWithTheta) {
  const ct::octree tree = ct::build_octree(ct::generate_uniform(3000, 4), {16, 21});
  const auto exact = fmm_test::direct_all(tree, 0.0);
  const accuracy t3 = accuracy_of<double>(tree, 6, 0.3, 0.0, exact);
  const accuracy t5 = accuracy_of<double>(tree, 6, 0.5, 0.0, exact);
  const accuracy t7 = accuracy_of<double>(tree, 6, 0.7, 0.0, exact);
  EXPECT_LT(t3.acc50, 0.2 * t5.acc50);
  EXPECT_LT(t5.acc50, 0.2 * t7.acc50);
  EXPECT_LT(t5.acc50, 2e-4);
  EXPECT_LT(t5.acc99, 4e-3);
  EXPECT_LT(t7.acc99, 5e-2);
}

TEST(FmmEvaluate, LatticeOfACompleteOctree) {
  // Equal cells everywhere: many pairs sit near the criterion's boundary.
  const ct::octree tree = ct::build_complete_octree(3, 4, 5);
  const auto exact = fmm_test::direct_all(tree, 1e-6);
  const accuracy a = accuracy_of<double>(tree, 6, 0.5, 1e-6, exact);
  EXPECT_LT(a.acc50, 4e-4);
  EXPECT_LT(a.acc99, 4e-3);
}

TEST(FmmEvaluate, DegenerateTrees) {
  const cf::fmm_options o{0.5, 0.0};
  EXPECT_TRUE((cf::evaluate<double, 4>(ct::build_octree(std::vector<ct::point>{}), o).empty()));
  // One point: no field at all.
  const auto one = cf::evaluate<double, 4>(ct::build_octree(std::vector<ct::point>{{1.f, 2.f, 3.f, 4.f}}), o);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].ax, 0.0);
  EXPECT_EQ(one[0].ay, 0.0);
  EXPECT_EQ(one[0].az, 0.0);
  EXPECT_EQ(one[0].phi, 0.0);
  // Two points: the exact pair force (one leaf, P2P), equal and opposite momenta.
  const auto two = cf::evaluate<double, 4>(ct::build_octree(std::vector<ct::point>{{0.f, 0.f, 0.f, 2.f}, {2.f, 0.f, 0.f, 3.f}}), o);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_DOUBLE_EQ(two[0].ax, 3.0 / 4.0);
  EXPECT_DOUBLE_EQ(two[1].ax, -2.0 / 4.0);
  EXPECT_DOUBLE_EQ(two[0].phi, -1.5);
  // Coincident points with softening (one leaf on max_depth holding 50 points) among others.
  std::vector<ct::point> pts(50, ct::point{0.3f, 0.3f, 0.3f, 0.01f});
  const auto more = ct::generate_uniform(500, 6);
  pts.insert(pts.end(), more.begin(), more.end());
  const ct::octree tree = ct::build_octree(pts, {8, 21});
  const auto exact = fmm_test::direct_all(tree, 1e-4);
  const accuracy a = accuracy_of<double>(tree, 6, 0.5, 1e-4, exact);
  EXPECT_LT(a.acc50, 1e-3);
  EXPECT_LT(a.acc99, 5e-2);  // points where the cluster's pull and the rest's nearly cancel
}

TEST(FmmEvaluate, RejectsOrdersOutsideTwoToEightAndForeignLists) {
  const ct::octree tree = ct::build_octree(ct::generate_uniform(100, 7));
  EXPECT_THROW(cf::evaluate<double>(1, tree, cf::fmm_options{}), std::invalid_argument);
  EXPECT_THROW(cf::evaluate<float>(9, tree, cf::fmm_options{}), std::invalid_argument);
  EXPECT_THROW(cf::evaluate<double>(4, tree, cf::fmm_options{1.5, 0.0}), std::invalid_argument);
  const ct::octree other = ct::build_octree(ct::generate_uniform(1000, 8), {8, 21});
  const auto g = cf::compute_cell_geometry(other);
  const auto lists = cf::build_interaction_lists(other, g, 0.5);
  EXPECT_THROW((cf::evaluate<double, 4>(tree, g, lists, 0.0)), std::invalid_argument);
}

}  // namespace
