// SPDX-License-Identifier: Apache-2.0
// Element-count lists for benchmark axes: "1M,16M,256M" (binary suffixes K = 2^10, M = 2^20,
// G = 2^30; plain numbers as given).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::bench {

/// Parses "1M,16M,256M" into {2^20, 2^24, 2^28}. Throws std::invalid_argument naming the bad item
/// (empty item, not a number, unknown suffix, zero, overflow).
std::vector<std::uint64_t> parse_size_list(std::string_view list);

/// 16777216 -> "16M", 1000 -> "1000": the shortest exact form with a binary suffix.
std::string format_size(std::uint64_t n);

}  // namespace canopy::bench
