// SPDX-License-Identifier: Apache-2.0
// Text helpers shared by the benchmark (progress lines, reports, option lists) and the canopy tool:
// number formatting and splitting of lists. Header-only, host C++.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::bench {

/// snprintf of one double, e.g. printf_string("%.1f ms", 3.14159).
inline std::string printf_string(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

/// Thousands separated by commas: 19,173,961.
inline std::string grouped(long long value) {
  std::string digits = std::to_string(value < 0 ? -value : value), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

/// The pieces of `s` between separators, empty ones included ("a,,b" -> "a", "", "b").
inline std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const auto at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

}  // namespace canopy::bench
