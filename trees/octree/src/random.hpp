// SPDX-License-Identifier: Apache-2.0
// Internal: portable random numbers. std::mt19937_64's output sequence is fixed by the standard,
// but std::uniform_real_distribution and std::normal_distribution are not, so the transforms are
// written out here: the same seed gives the same points with any standard library.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace canopy::trees::detail {

// Points are generated in chunks of this many, each chunk from its own engine, so results do not
// depend on the thread count.
inline constexpr std::size_t generator_chunk = 65536;

// splitmix64 (Steele, Lea & Flood 2014): decorrelates (seed, chunk) pairs before they seed an
// engine, so neighbouring chunks of neighbouring seeds do not share streams.
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Word `counter` of the SplitMix64 stream `key`: splitmix64 is exactly mix64 of a Weyl sequence,
// so indexing it gives a counter-based generator (cf. Salmon et al. 2011, Random123) whose words
// can be computed in any order and on any thread. Passes BigCrush like the sequential form.
inline std::uint64_t splitmix64_at(std::uint64_t key, std::uint64_t counter) {
  return mix64(key + counter * 0x9e3779b97f4a7c15ull);
}

inline std::mt19937_64 chunk_engine(std::uint64_t seed, std::uint64_t stream, std::uint64_t chunk) {
  return std::mt19937_64(mix64(mix64(seed ^ mix64(stream)) + chunk));
}

// Uniform double in [0, 1) with 53 random bits.
inline double uniform01(std::mt19937_64& e) { return static_cast<double>(e() >> 11) * 0x1.0p-53; }

// Uniform float in [0, 1) with 24 random bits (exact in float, never rounds up to 1).
inline float uniform01f(std::mt19937_64& e) { return static_cast<float>(e() >> 40) * 0x1.0p-24f; }

// Uniform integer in [0, n) (n > 0), by Lemire's multiply-shift; the bias is below 2^-32 for the
// small n used here.
inline std::uint32_t uniform_below(std::mt19937_64& e, std::uint32_t n) {
  return static_cast<std::uint32_t>(((e() >> 32) * static_cast<std::uint64_t>(n)) >> 32);
}

// Standard normal pair by the Box-Muller transform.
struct normal_pair {
  double a, b;
};
inline normal_pair standard_normal_pair(std::mt19937_64& e) {
  const double u1 = 1.0 - uniform01(e);  // (0, 1]: log stays finite
  const double u2 = uniform01(e);
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double t = 2.0 * std::numbers::pi * u2;
  return {r * std::cos(t), r * std::sin(t)};
}

}  // namespace canopy::trees::detail
