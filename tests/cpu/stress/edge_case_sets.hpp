// SPDX-License-Identifier: Apache-2.0
// The point sets at the edges of what the octree path accepts, shared by the CPU edge-case test
// and its GPU twin (tests/gpu/stress/edge_cases_gpu_test.cu).
#pragma once

#include <canopy/trees/octree.hpp>
#include <canopy/trees/point.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace canopy::testing {

struct edge_case {
  std::string name;
  std::vector<trees::point> points;
  trees::build_options options;
};

inline void PrintTo(const edge_case& c, std::ostream* os) { *os << c.name << " (" << c.points.size() << " points)"; }

inline float ulps_above(float x, int k) {
  for (int i = 0; i < k; ++i) x = std::nextafter(x, std::numeric_limits<float>::infinity());
  return x;
}

// Point sets every stage must accept: build_octree, check_invariants, the reference, and the
// scheduler's float pass within the reference's tolerance.
inline std::vector<edge_case> accepted_edge_cases() {
  using trees::point;
  std::vector<edge_case> cases;
  cases.push_back({"empty", {}, {1, 21}});
  cases.push_back({"one_point", {point{0.25f, 0.5f, 0.75f, 2.0f}}, {1, 21}});
  cases.push_back({"one_massless_point", {point{-3.0f, 4.0f, 1e-30f, 0.0f}}, {1, 21}});
  cases.push_back({"identical_1000", std::vector<point>(1000, point{0.3f, -0.7f, 0.1f, 0.001f}), {8, 21}});
  cases.push_back({"identical_massless", std::vector<point>(64, point{1.0f, 1.0f, 1.0f, 0.0f}), {4, 21}});
  {  // 1-ULP neighbours along each axis: separable by depth (the extent is 64 ulps)
    std::vector<point> p;
    for (int i = 0; i < 64; ++i) p.push_back(point{ulps_above(1.0f, i), ulps_above(1.0f, (i * 7) % 64), ulps_above(1.0f, (i * 13) % 64), 1.0f});
    cases.push_back({"ulp_neighbours", p, {1, 21}});
  }
  {  // 1-ULP neighbours that the depth limit cannot separate: they share a leaf on level 21
    std::vector<point> p;
    for (int i = 0; i < 16; ++i) p.push_back(point{ulps_above(1.0f, i), 1.0f, 1.0f, 1.0f});
    p.push_back(point{-1.0f, -1.0f, -1.0f, 1.0f});
    cases.push_back({"ulp_neighbours_below_depth_limit", p, {1, 21}});
  }
  {  // denormal coordinates and signed zeros beside a point at 1: the denormals share a leaf of
     // normal size. (A tree of denormals alone has cells of denormal size, where float's absolute
     // precision, not the reference's relative bound, limits the centre of mass.)
    std::vector<point> p;
    const float tiny = std::numeric_limits<float>::denorm_min();
    for (int i = 0; i < 20; ++i) p.push_back(point{tiny * static_cast<float>(i), -tiny * static_cast<float>(i % 5), i % 2 ? -0.0f : 0.0f, 1.0f});
    p.push_back(point{1.0f, 1.0f, 1.0f, tiny});  // and a denormal mass
    cases.push_back({"denormals", p, {2, 21}});
  }
  {  // the largest accepted coordinates (+-2^50, trees::max_coordinate_magnitude), spread and clustered
    std::vector<point> p;
    const float big = static_cast<float>(trees::max_coordinate_magnitude);
    for (int c = 0; c < 8; ++c) p.push_back(point{c & 1 ? big : -big, c & 2 ? big : -big, c & 4 ? big : -big, 1.0f});
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> u(-trees::max_coordinate_magnitude, trees::max_coordinate_magnitude);
    for (int i = 0; i < 56; ++i)
      p.push_back(point{static_cast<float>(u(rng)), static_cast<float>(u(rng)), static_cast<float>(u(rng)), 0.5f});
    cases.push_back({"near_coordinate_limit", p, {4, 21}});
    std::vector<point> q;
    for (int i = 0; i < 32; ++i) q.push_back(point{big - 1e12f * static_cast<float>(i), big, 0.9f * big + 1e12f * static_cast<float>(i % 4), 1.0f});
    cases.push_back({"near_coordinate_limit_cluster", q, {4, 21}});
  }
  {  // every point coincides, far from the origin (the root cube must still have an edge)
    cases.push_back({"identical_far_from_origin", std::vector<point>(10, point{1e15f, 0.0f, 0.0f, 1.0f}), {1, 21}});
    cases.push_back({"identical_at_coordinate_limit", std::vector<point>(10, point{-static_cast<float>(trees::max_coordinate_magnitude), 1e15f, 1.0f, 1.0f}), {1, 21}});
  }
  {  // the depth limit: points at 2^-k force a chain of cells; max_depth 21 must stop it
    std::vector<point> p;
    for (int k = 1; k <= 40; ++k) p.push_back(point{std::ldexp(1.0f, -k), 0.0f, 0.0f, 1.0f});
    p.push_back(point{1.0f, 1.0f, 1.0f, 1.0f});
    cases.push_back({"depth_limit_21", p, {1, 21}});
    cases.push_back({"depth_limit_0", p, {1, 0}});
    cases.push_back({"depth_limit_3", p, {1, 3}});
  }
  return cases;
}

}  // namespace canopy::testing
