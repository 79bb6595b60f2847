// SPDX-License-Identifier: Apache-2.0
// A user's own payload (examples/payloads/com_sphere.hpp) through the octree passes: node, twig and
// bucket tasks on the CPU scheduler give the same bits (each node folds its children in child
// order whatever the kind), every count is exact, every mass is the double sum to float rounding,
// and every point of a node lies within the node's radius of its centre.
#include <canopy/cpu_scheduler.hpp>
#include <canopy/passes/bucket_pass.hpp>
#include <canopy/passes/twig_pass.hpp>
#include <canopy/passes/upward_pass.hpp>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/octree.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "com_sphere.hpp"

namespace {

namespace ct = canopy::trees;
using payload_example::com_sphere;
using payload_example::com_sphere_policy;

std::vector<com_sphere> poisoned(const ct::octree& tree) {
  std::vector<com_sphere> out(static_cast<std::size_t>(tree.node_count()));
  std::memset(out.data(), 0xff, out.size() * sizeof(com_sphere));
  return out;
}

std::vector<com_sphere> run_node(const ct::octree& tree) {
  std::vector<com_sphere> out = poisoned(tree);
  canopy::scheduler_options o;
  o.blocks = 3;
  const auto r = canopy::cpu_scheduler(ct::make_upward_graph(tree), o).run(ct::host_upward_ops(tree, out.data(), com_sphere_policy{}));
  EXPECT_TRUE(r.ok()) << r.message;
  return out;
}

std::vector<com_sphere> run_twig(const ct::octree& tree) {
  std::vector<com_sphere> out = poisoned(tree);
  const ct::twig_graph tg = ct::make_twig_graph(tree);
  canopy::scheduler_options o;
  o.blocks = 3;
  const auto r = canopy::cpu_scheduler(tg.graph, o).run(ct::host_twig_upward_ops(tree, tg.tasks, out.data(), com_sphere_policy{}));
  EXPECT_TRUE(r.ok()) << r.message;
  return out;
}

std::vector<com_sphere> run_bucket(const ct::octree& tree, int bucket_points) {
  std::vector<com_sphere> out = poisoned(tree);
  const ct::bucket_graph bg = ct::make_bucket_graph(tree, bucket_points);
  const ct::bucket_upward_ops<com_sphere_policy> ops{
      bg.blob.data(),
      {tree.points.data(), tree.first_child.data(), tree.child_count.data(), tree.point_begin.data(),
       tree.point_count.data(), out.data()}};
  canopy::scheduler_options o;
  o.blocks = 3;
  const auto r = canopy::cpu_scheduler(bg.graph, o).run(ops);
  EXPECT_TRUE(r.ok()) << r.message;
  return out;
}

void expect_valid(const ct::octree& tree, const std::vector<com_sphere>& out, const std::string& what) {
  ASSERT_EQ(out.size(), static_cast<std::size_t>(tree.node_count())) << what;
  for (std::int32_t n = 0; n < tree.node_count(); ++n) {
    const com_sphere& s = out[static_cast<std::size_t>(n)];
    const std::int32_t begin = tree.point_begin[n], count = tree.point_count[n];
    ASSERT_EQ(s.count, static_cast<std::uint32_t>(count)) << what << ": node " << n;
    double mass = 0;
    for (std::int32_t i = begin; i < begin + count; ++i) mass += tree.points[i].m;
    // A float sum of at most a node's points, chained through at most depth + leaf additions.
    EXPECT_NEAR(s.mass, mass, 1e-4 * mass + 1e-30) << what << ": node " << n;
    const ct::box& b = tree.bounds[n];
    const double edge = b.hi[0] - b.lo[0];
    // Slack for the float rounding of the centre and of the radius' additions along the chain.
    const double slack = 1e-5 * (edge + std::abs(s.com[0]) + std::abs(s.com[1]) + std::abs(s.com[2]) + s.radius);
    for (std::int32_t i = begin; i < begin + count; ++i) {
      const ct::point& p = tree.points[i];
      const double d = std::sqrt((p.x - double(s.com[0])) * (p.x - double(s.com[0])) +
                                 (p.y - double(s.com[1])) * (p.y - double(s.com[1])) +
                                 (p.z - double(s.com[2])) * (p.z - double(s.com[2])));
      ASSERT_LE(d, s.radius + slack) << what << ": node " << n << ", point " << i << " outside the sphere";
    }
    // The bound is not loose beyond reason: each shift moves a centre within the cell, so a radius
    // stays within two cell diagonals.
    EXPECT_LE(s.radius, 2 * std::sqrt(3.0) * edge + slack) << what << ": node " << n;
  }
}

void expect_same_bits(const std::vector<com_sphere>& a, const std::vector<com_sphere>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t n = 0; n < a.size(); ++n)
    ASSERT_EQ(std::memcmp(&a[n], &b[n], sizeof(com_sphere)), 0) << what << ": node " << n;
}

TEST(UserPayload, ComSphereThroughNodeTwigAndBucketTasks) {
  std::vector<std::pair<std::string, ct::octree>> trees;
  trees.emplace_back("plummer 5000, leaf 16", ct::build_octree(ct::generate_plummer(5000, 3), {16, 21}));
  trees.emplace_back("clusters 3000, leaf 1", ct::build_octree(ct::generate_clusters(3000, 9), {1, 21}));
  trees.emplace_back("complete depth 3", ct::build_complete_octree(3, 8, 4));
  std::vector<ct::point> massless = ct::generate_uniform(300, 5);
  for (ct::point& p : massless) p.m = 0.f;
  trees.emplace_back("massless 300, leaf 4", ct::build_octree(massless, {4, 21}));
  trees.emplace_back("empty", ct::build_octree({}, ct::build_options{}));
  for (const auto& [name, tree] : trees) {
    const std::vector<com_sphere> node = run_node(tree);
    expect_valid(tree, node, name + ", node tasks");
    expect_same_bits(run_twig(tree), node, name + ", twig tasks");
    for (const int bucket_points : {1, 64, 256}) expect_same_bits(run_bucket(tree, bucket_points), node, name + ", bucket tasks");
  }
}

TEST(UserPayload, RadiusIsTighterThanTheHalfDiagonalForAClusterInACorner) {
  // Points in one corner of the root's cell: the sphere about their centre is far smaller than
  // the cell's half-diagonal, which is what an opening criterion gains by it.
  std::vector<ct::point> pts = ct::generate_uniform(2000, 8);
  for (ct::point& p : pts) {
    p.x = 0.01f * p.x;
    p.y = 0.01f * p.y;
    p.z = 0.01f * p.z;
  }
  pts.push_back(ct::point{1.f, 1.f, 1.f, 0.f});  // a massless point far away stretches the cell
  const ct::octree tree = ct::build_octree(pts, {32, 21});
  const std::vector<com_sphere> out = run_node(tree);
  expect_valid(tree, out, "corner cluster");
  const double half_diagonal = 0.5 * std::sqrt(3.0) * (tree.bounds[0].hi[0] - tree.bounds[0].lo[0]);
  EXPECT_GT(out[0].radius, 1.5f);  // the far point is in the sphere
  EXPECT_LT(out[1].radius, 0.1 * half_diagonal) << "the cluster's own child cell";
}

}  // namespace
