// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/errors.hpp>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/morton.hpp>
#include <canopy/trees/octree.hpp>

#include "lattice.hpp"
#include "parallel.hpp"
#include "random.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <string>

namespace canopy::trees {

namespace {

// Stream ids keep the distributions apart: uniform(n, s) and plummer(n, s) share no random numbers.
enum : std::uint64_t { uniform_stream = 1, plummer_stream = 2, clusters_stream = 3, lattice_stream = 4 };

// Points [begin, end) of the n that make(engine) gives chunk by chunk: each chunk from its own
// engine, so a slice is the same points as the whole set's (the chunk's points before `begin` are
// drawn and dropped: `make` may draw any number of random numbers).
template <class Make>
std::vector<point> generate_chunked(std::size_t n, std::uint64_t seed, std::uint64_t stream, Make make, std::size_t begin,
                                    std::size_t end) {
  std::vector<point> out(end - begin);
  if (begin >= end) return out;
  const std::size_t first = begin / detail::generator_chunk, chunks = (end + detail::generator_chunk - 1) / detail::generator_chunk;
  detail::parallel_parts(chunks - first, [&](std::size_t k) {
    const std::size_t c = first + k;
    std::mt19937_64 engine = detail::chunk_engine(seed, stream, c);
    const std::size_t last = std::min({n, end, (c + 1) * detail::generator_chunk});
    for (std::size_t i = c * detail::generator_chunk; i < last; ++i) {
      const point p = make(engine);
      if (i >= begin) out[i - begin] = p;
    }
  });
  return out;
}

float equal_mass(std::size_t n) { return n > 0 ? static_cast<float>(1.0 / static_cast<double>(n)) : 0.0f; }

}  // namespace

distribution parse_distribution(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "uniform") return distribution::uniform;
  if (lower == "plummer") return distribution::plummer;
  if (lower == "clusters") return distribution::clusters;
  if (lower == "lattice") return distribution::lattice;
  throw input_error("distribution",
                    "unknown distribution '" + std::string(name) + "' (expected uniform, plummer, clusters or lattice)");
}

std::string_view to_string(distribution d) noexcept {
  switch (d) {
    case distribution::uniform: return "uniform";
    case distribution::plummer: return "plummer";
    case distribution::clusters: return "clusters";
    case distribution::lattice: return "lattice";
  }
  return "unknown";
}

namespace {

std::vector<point> uniform_slice(std::size_t n, std::uint64_t seed, std::size_t begin, std::size_t end) {
  const float m = equal_mass(n);
  return generate_chunked(
      n, seed, uniform_stream,
      [m](std::mt19937_64& e) {
        const float x = detail::uniform01f(e), y = detail::uniform01f(e), z = detail::uniform01f(e);
        return point{x, y, z, m};
      },
      begin, end);
}

std::vector<point> plummer_slice(std::size_t n, std::uint64_t seed, std::size_t begin, std::size_t end) {
  const float m = equal_mass(n);
  return generate_chunked(
      n, seed, plummer_stream,
      [m](std::mt19937_64& e) {
        double r;
        do {
          // Enclosed mass fraction X = r^3 / (1 + r^2)^(3/2), inverted. X in (0, 1]; X = 1 gives
          // r = inf, which the cut rejects like any other radius beyond it.
          const double x = 1.0 - detail::uniform01(e);
          r = 1.0 / std::sqrt(std::pow(x, -2.0 / 3.0) - 1.0);
        } while (!(r <= plummer_cutoff_radius));
        // Uniform direction: z uniform in [-1, 1], azimuth uniform (Archimedes' hat-box theorem).
        const double cz = 2.0 * detail::uniform01(e) - 1.0;
        const double phi = 2.0 * std::numbers::pi * detail::uniform01(e);
        const double s = std::sqrt(std::max(0.0, 1.0 - cz * cz));
        return point{static_cast<float>(r * s * std::cos(phi)), static_cast<float>(r * s * std::sin(phi)),
                     static_cast<float>(r * cz), m};
      },
      begin, end);
}

std::vector<point> clusters_slice(std::size_t n, std::uint64_t seed, int clusters, std::size_t begin, std::size_t end) {
  if (clusters < 1) {
    throw input_error("generate_clusters: clusters", "must be at least 1, got " + std::to_string(clusters));
  }
  struct cluster {
    double centre[3];
    double sigma;
  };
  std::vector<cluster> shape(static_cast<std::size_t>(clusters));
  // The cluster shapes come from their own engine (a chunk index no point chunk can reach).
  std::mt19937_64 shape_engine = detail::chunk_engine(seed, clusters_stream, std::numeric_limits<std::uint64_t>::max());
  for (cluster& c : shape) {
    for (double& x : c.centre) x = 0.1 + 0.8 * detail::uniform01(shape_engine);
    c.sigma = 0.01 + 0.04 * detail::uniform01(shape_engine);
  }
  const float m = equal_mass(n);
  return generate_chunked(
      n, seed, clusters_stream,
      [&shape, m](std::mt19937_64& e) {
        const cluster& c = shape[detail::uniform_below(e, static_cast<std::uint32_t>(shape.size()))];
        const detail::normal_pair g1 = detail::standard_normal_pair(e);
        const detail::normal_pair g2 = detail::standard_normal_pair(e);
        return point{static_cast<float>(c.centre[0] + c.sigma * g1.a), static_cast<float>(c.centre[1] + c.sigma * g1.b),
                     static_cast<float>(c.centre[2] + c.sigma * g2.a), m};
      },
      begin, end);
}

}  // namespace

std::vector<point> generate_uniform(std::size_t n, std::uint64_t seed) { return uniform_slice(n, seed, 0, n); }

std::vector<point> generate_plummer(std::size_t n, std::uint64_t seed) { return plummer_slice(n, seed, 0, n); }

std::vector<point> generate_clusters(std::size_t n, std::uint64_t seed, int clusters) {
  return clusters_slice(n, seed, clusters, 0, n);
}

std::vector<point> generate_slice(distribution d, std::size_t n, std::uint64_t seed, std::size_t begin, std::size_t end) {
  if (begin > end || end > n) {
    throw input_error("generate_slice", "points [" + std::to_string(begin) + ", " + std::to_string(end) + ") are not a slice of " +
                                            std::to_string(n));
  }
  switch (d) {
    case distribution::uniform: return uniform_slice(n, seed, begin, end);
    case distribution::plummer: return plummer_slice(n, seed, begin, end);
    case distribution::clusters: return clusters_slice(n, seed, 16, begin, end);
    case distribution::lattice: break;
  }
  throw input_error("generate_slice", "the lattice has no slices (generate_lattice makes it whole)");
}

std::vector<point> generate_lattice(int depth, int per_leaf, std::uint64_t seed) {
  std::vector<point> out(detail::lattice_point_count("generate_lattice", depth, per_leaf));
  detail::fill_lattice_points(out, depth, per_leaf, seed);
  return out;
}

namespace detail {

std::size_t lattice_point_count(const char* who, int depth, int per_leaf) {
  if (depth < 0 || depth > max_octree_depth) {
    throw input_error(std::string(who) + ": depth",
                      "must be in [0, " + std::to_string(max_octree_depth) + "], got " + std::to_string(depth));
  }
  if (per_leaf < 1) {
    throw input_error(std::string(who) + ": per_leaf", "must be at least 1, got " + std::to_string(per_leaf));
  }
  // Point indices are int32 in the tree layout. 8^21 = 2^63 still fits uint64, but the product
  // with per_leaf may not, so stop multiplying as soon as the limit is passed.
  const std::uint64_t limit = static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max());
  std::uint64_t cells = 1;
  for (int l = 0; l < depth; ++l) {
    cells *= 8;
    if (cells > limit) break;
  }
  if (cells > limit || cells * static_cast<std::uint64_t>(per_leaf) > limit) {
    throw input_error(std::string(who),
                      "8^" + std::to_string(depth) + " * " + std::to_string(per_leaf) +
                          " points exceed the 2^31 - 1 that int32 point indices can address");
  }
  return static_cast<std::size_t>(cells) * static_cast<std::size_t>(per_leaf);
}

namespace {
// Position inside a cell of edge 2^-depth from `bits` random bits: with k = 24 - depth,
// (cell * 2^k + j) * 2^-(depth + k) for a k-bit j is exact in float (cell * 2^k + j < 2^24), lies
// in the half-open cell by construction, and is already on the float grid of [0.5, 1) (spacing
// 2^-24), so finer jitter would only be rounded away.
float jitter(std::uint32_t cell, std::uint64_t bits, int depth, float scale) {
  const int k = 24 - depth;
  const std::uint32_t j = static_cast<std::uint32_t>(bits & ((std::uint64_t{1} << k) - 1));
  return static_cast<float>((cell << k) | j) * scale;
}
}  // namespace

void fill_lattice_points(std::span<point> out, int depth, int per_leaf, std::uint64_t seed) {
  // 134M points at depth 8: this is the hot loop of the benchmark's setup, so it draws from a
  // counter-based stream (two SplitMix64 words per point, indexed by the point) instead of an
  // engine: no per-chunk seeding, no sequential state, any chunking gives the same points.
  const std::uint64_t key = mix64(seed ^ mix64(lattice_stream));
  const float scale = std::ldexp(1.0f, -24);
  const double mass_scale = 1.0 / static_cast<double>(out.size());
  const std::size_t leaf_points = static_cast<std::size_t>(per_leaf);
  const std::size_t leaves = out.size() / leaf_points;
  const std::size_t leaves_per_chunk = std::max<std::size_t>(1, generator_chunk / leaf_points);
  parallel_chunks(leaves, leaves_per_chunk, [&](std::size_t first_leaf, std::size_t end_leaf) {
    for (std::size_t leaf = first_leaf; leaf < end_leaf; ++leaf) {
      const morton_cell c = morton_decode(leaf);
      for (std::size_t i = leaf * leaf_points; i < (leaf + 1) * leaf_points; ++i) {
        const std::uint64_t a = splitmix64_at(key, 2 * i), b = splitmix64_at(key, 2 * i + 1);
        const double um = static_cast<double>(b >> 24) * 0x1.0p-40;  // [0, 1), 40 bits
        out[i] = point{jitter(c.x, a, depth, scale), jitter(c.y, a >> 24, depth, scale), jitter(c.z, b, depth, scale),
                       static_cast<float>((0.5 + um) * mass_scale)};
      }
    }
  });
}

}  // namespace detail

}  // namespace canopy::trees
