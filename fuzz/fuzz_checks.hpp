// SPDX-License-Identifier: Apache-2.0
// What every fuzz target checks about an input the reader accepted. A failed check calls
// __builtin_trap(), which libFuzzer reports as a crash with the input saved.
#pragma once

#include <canopy/trees/errors.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/point.hpp>
#include <canopy/trees/reference.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace canopy::fuzz {

#define CANOPY_FUZZ_CHECK(cond)                                                   \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      __builtin_trap();                                                           \
    }                                                                             \
  } while (0)

// Runs a reader over the input (`parse` returns its points; `source` is the name it was given):
// a rejection must be the documented input_error, naming that source and a problem, and gives
// nullopt (nothing more to check); anything else escaping is a crash for libFuzzer.
template <class Parse>
std::optional<std::vector<trees::point>> accepted_points(std::string_view source, Parse&& parse) {
  try {
    return parse();
  } catch (const trees::input_error& e) {
    CANOPY_FUZZ_CHECK(e.source() == source && !e.problem().empty());
    return std::nullopt;
  }
}

// Accepted points are finite with finite non-negative masses (the readers' promise), and they
// build a valid octree whose reference root holds every point: the bytes a reader lets through
// are safe for everything downstream. `knob` varies the build options from the input itself.
inline void check_accepted_points(std::span<const trees::point> points, std::uint8_t knob) {
  for (const trees::point& p : points) {
    CANOPY_FUZZ_CHECK(std::isfinite(p.x) && std::isfinite(p.y) && std::isfinite(p.z));
    CANOPY_FUZZ_CHECK(std::isfinite(p.m) && p.m >= 0.0f);
  }
  if (points.size() > 4096) return;  // libFuzzer inputs are small; keep each run well under 1 s
  // CANOPY_FUZZ_READER_ONLY=1 stops here: to keep fuzzing a reader while a builder bug found by
  // the stage below is open. CI never sets it.
  static const bool reader_only = std::getenv("CANOPY_FUZZ_READER_ONLY") != nullptr;
  if (reader_only) return;
  trees::build_options opt;
  opt.max_leaf = 1 + (knob & 7);
  opt.max_depth = (knob >> 3) % (trees::max_octree_depth + 1);
  // The readers accept any finite coordinate; build_octree refuses one beyond +-2^50 (its float
  // payloads would overflow) with input_error, and must accept everything else.
  bool in_range = true;
  for (const auto& p : points)
    in_range = in_range && std::abs(p.x) <= trees::max_coordinate_magnitude &&
               std::abs(p.y) <= trees::max_coordinate_magnitude && std::abs(p.z) <= trees::max_coordinate_magnitude;
  if (!in_range) {
    bool refused = false;
    try {
      (void)trees::build_octree(points, opt);
    } catch (const trees::input_error&) {
      refused = true;
    }
    CANOPY_FUZZ_CHECK(refused);
    return;
  }
  // It also refuses points whose total mass x squared extent passes max_moment_magnitude (their float
  // moments would overflow): allowed only where a generous upper bound of that product does too.
  double mass = 0.0, magnitude = 0.0, lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
  for (std::size_t i = 0; i < points.size(); ++i) {
    const double v[3] = {points[i].x, points[i].y, points[i].z};
    mass += points[i].m;
    for (int a = 0; a < 3; ++a) {
      lo[a] = i == 0 ? v[a] : std::min(lo[a], v[a]);
      hi[a] = i == 0 ? v[a] : std::max(hi[a], v[a]);
      magnitude = std::max(magnitude, std::abs(v[a]));
    }
  }
  const double extent = std::max({hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]});
  // >= the root edge + |corner|: the edge is at most the padded extent, 2^-24 of the magnitude, or
  // 1.0 when the points coincide (bounding_cube), and the corner at most the magnitude plus half the
  // edge, so 1.5 + 1.5 x the extent + the magnitude bounds it (one point at the origin: 1.5).
  const double reach = std::max(1.0, 8.0 * extent + 2.0 * magnitude + 2.0);
  trees::octree tree;
  try {
    tree = trees::build_octree(points, opt);
  } catch (const trees::input_error&) {
    CANOPY_FUZZ_CHECK(mass * reach * reach > trees::max_moment_magnitude);  // else: a bug
    return;
  }
  trees::check_invariants(tree);                                // throws invariant_error: a bug
  const auto payload = trees::reference_upward_pass(tree);
  CANOPY_FUZZ_CHECK(payload.size() == static_cast<std::size_t>(tree.node_count()));
  CANOPY_FUZZ_CHECK(payload[0].count == points.size());
}

}  // namespace canopy::fuzz
