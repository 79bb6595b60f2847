// SPDX-License-Identifier: Apache-2.0
// Seeded point generators. The same (arguments, seed) give the same points on every machine and
// for every host_threads() setting: points are produced in fixed chunks of 65,536, each from its
// own std::mt19937_64 seeded from (seed, chunk index), with hand-written uniform and normal
// transforms (the std:: distributions are implementation-defined). The lattice, which must make
// 134M points quickly, uses an indexed SplitMix64 stream instead (two words per point).
#pragma once

#include <canopy/trees/point.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace canopy::trees {

enum class distribution { uniform, plummer, clusters, lattice };

// "uniform", "plummer", "clusters" or "lattice" (ASCII case-insensitive); throws input_error.
distribution parse_distribution(std::string_view name);
std::string_view to_string(distribution d) noexcept;

// Uniform in the unit cube [0,1)^3, every mass 1/n.
std::vector<point> generate_uniform(std::size_t n, std::uint64_t seed);

// Plummer sphere of scale radius 1 centred on the origin, every mass 1/n. Radii are drawn by
// inverting the cumulative mass profile, r = (X^(-2/3) - 1)^(-1/2) (Aarseth, Henon & Wielen
// 1974), directions uniform on the sphere; radii beyond plummer_cutoff_radius are redrawn
// (they hold 1.5 % of the mass), so the points lie in a bounded cube of edge 20.
inline constexpr double plummer_cutoff_radius = 10.0;
std::vector<point> generate_plummer(std::size_t n, std::uint64_t seed);

// `clusters` isotropic Gaussian blobs: centres uniform in [0.1, 0.9)^3, standard deviations
// uniform in [0.01, 0.05), each point in a cluster chosen uniformly; every mass 1/n.
// Throws input_error when clusters < 1.
std::vector<point> generate_clusters(std::size_t n, std::uint64_t seed, int clusters = 16);

// Points [begin, end) of the n points generate_uniform, generate_plummer or generate_clusters (16
// clusters) would give, without making the others' (a rank of a distributed run makes its share:
// about (end - begin) plus one chunk of work). Throws input_error for the lattice or a range
// outside [0, n].
std::vector<point> generate_slice(distribution d, std::size_t n, std::uint64_t seed, std::size_t begin, std::size_t end);

// 8^depth * per_leaf points, exactly per_leaf in each finest cell of the unit cube at `depth`,
// uniformly jittered inside the cell on the 2^-24 grid (the float spacing just below 1), so always
// inside its half-open bounds; masses uniform in [0.5, 1.5) / count (total about 1). Returned in Morton order of the cells: identical to
// build_complete_octree(depth, per_leaf, seed).points. Throws input_error for depth outside
// [0, 21], per_leaf < 1, or more than 2^31 - 1 points.
std::vector<point> generate_lattice(int depth, int per_leaf, std::uint64_t seed);

}  // namespace canopy::trees
