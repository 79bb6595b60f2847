// Number formatting shared by the benchmark engine's progress lines and its reports.
#pragma once

#include <cstdio>
#include <string>

namespace canopy::bench::detail {

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

}  // namespace canopy::bench::detail
