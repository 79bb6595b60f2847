// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/morton.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace canopy::trees {
namespace {

// Bit-by-bit interleave: the oracle for the magic-number version.
std::uint64_t naive_encode(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  std::uint64_t code = 0;
  for (int i = 0; i < 21; ++i) {
    code |= static_cast<std::uint64_t>((x >> i) & 1) << (3 * i + 2);
    code |= static_cast<std::uint64_t>((y >> i) & 1) << (3 * i + 1);
    code |= static_cast<std::uint64_t>((z >> i) & 1) << (3 * i);
  }
  return code;
}

TEST(Morton, KnownCodes) {
  EXPECT_EQ(morton_encode(0, 0, 0), 0u);
  EXPECT_EQ(morton_encode(1, 0, 0), 4u);
  EXPECT_EQ(morton_encode(0, 1, 0), 2u);
  EXPECT_EQ(morton_encode(0, 0, 1), 1u);
  EXPECT_EQ(morton_encode(1, 1, 1), 7u);
  EXPECT_EQ(morton_encode(2, 0, 0), 32u);
  const std::uint32_t max = morton_axis_cells - 1;
  EXPECT_EQ(morton_encode(max, max, max), (std::uint64_t{1} << 63) - 1);  // 63 bits, top bit free
}

TEST(Morton, EncodeMatchesNaiveAndDecodeInverts) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 100000; ++i) {
    const std::uint32_t x = rng() & 0x1fffff, y = rng() & 0x1fffff, z = rng() & 0x1fffff;
    const std::uint64_t code = morton_encode(x, y, z);
    ASSERT_EQ(code, naive_encode(x, y, z));
    const morton_cell c = morton_decode(code);
    ASSERT_EQ(c.x, x);
    ASSERT_EQ(c.y, y);
    ASSERT_EQ(c.z, z);
  }
}

TEST(Morton, HighBitsAreIgnored) {
  EXPECT_EQ(morton_encode(0xffe00000u | 5u, 0, 0), morton_encode(5, 0, 0));
}

TEST(Morton, PrefixAndOctantDescribeTheCells) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const std::uint32_t x = rng() & 0x1fffff, y = rng() & 0x1fffff, z = rng() & 0x1fffff;
    const std::uint64_t code = morton_encode(x, y, z);
    for (int level = 0; level <= 21; ++level) {
      const morton_cell c = morton_decode(morton_prefix(code, level));
      ASSERT_EQ(c.x, x >> (21 - level));
      ASSERT_EQ(c.y, y >> (21 - level));
      ASSERT_EQ(c.z, z >> (21 - level));
      if (level < 21) {
        const unsigned s = 20 - level;
        const unsigned octant = ((x >> s) & 1) << 2 | ((y >> s) & 1) << 1 | ((z >> s) & 1);
        ASSERT_EQ(morton_octant(code, level), octant);
      }
    }
  }
}

TEST(Morton, QuantizeClampsOutsideAndNaN) {
  const double inv = morton_axis_cells;  // unit cube
  EXPECT_EQ(morton_quantize(-0.5, 0.0, inv), 0u);
  EXPECT_EQ(morton_quantize(0.0, 0.0, inv), 0u);
  EXPECT_EQ(morton_quantize(0.5, 0.0, inv), morton_axis_cells / 2);
  EXPECT_EQ(morton_quantize(1.0, 0.0, inv), morton_axis_cells - 1);
  EXPECT_EQ(morton_quantize(7.0, 0.0, inv), morton_axis_cells - 1);
  EXPECT_EQ(morton_quantize(std::nan(""), 0.0, inv), 0u);
}

TEST(Morton, HostCodesMatchPerPointCodes) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(-2.0f, 3.0f);
  std::vector<point> pts(200000);
  for (point& p : pts) p = {u(rng), u(rng), u(rng), 1.0f};
  const box cube{{-2.0, -2.0, -2.0}, {3.0, 3.0, 3.0}};
  const std::vector<std::uint64_t> codes = morton_codes(pts, cube);
  ASSERT_EQ(codes.size(), pts.size());
  const morton_grid g = make_morton_grid(cube);
  for (std::size_t i = 0; i < pts.size(); ++i) ASSERT_EQ(codes[i], morton_code(pts[i], g));
  // The cell that a code names contains its point.
  for (std::size_t i = 0; i < 1000; ++i) {
    const morton_cell c = morton_decode(codes[i]);
    const double edge = 5.0 / morton_axis_cells;
    EXPECT_LE(-2.0 + c.x * edge, pts[i].x + 1e-12);
    EXPECT_GE(-2.0 + (c.x + 1) * edge, pts[i].x - 1e-12);
  }
}

}  // namespace
}  // namespace canopy::trees
