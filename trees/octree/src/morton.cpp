// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/morton.hpp>

#include "parallel.hpp"

namespace canopy::trees {

std::vector<std::uint64_t> morton_codes(std::span<const point> points, const box& cube) {
  std::vector<std::uint64_t> codes(points.size());
  const morton_grid grid = make_morton_grid(cube);
  detail::parallel_chunks(points.size(), std::size_t{1} << 16, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) codes[i] = morton_code(points[i], grid);
  });
  return codes;
}

}  // namespace canopy::trees
