// SPDX-License-Identifier: Apache-2.0
#include "common/sizes.hpp"

#include <cctype>
#include <limits>
#include <stdexcept>

namespace canopy::bench {

namespace {

std::uint64_t parse_one(std::string_view item) {
  const std::string shown(item);
  while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
  while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
  if (item.empty()) throw std::invalid_argument("size list: empty item");
  unsigned shift = 0;
  switch (std::toupper(static_cast<unsigned char>(item.back()))) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    default: break;
  }
  if (shift != 0) item.remove_suffix(1);
  if (item.empty()) throw std::invalid_argument("size list: '" + shown + "' has no number");
  std::uint64_t value = 0;
  for (const char c : item) {
    if (!std::isdigit(static_cast<unsigned char>(c)))
      throw std::invalid_argument("size list: '" + shown + "' is not a count (digits and an optional K, M or G)");
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10)
      throw std::invalid_argument("size list: '" + shown + "' is too large");
    value = value * 10 + digit;
  }
  if (value == 0) throw std::invalid_argument("size list: '" + shown + "' is zero");
  if (value > (std::numeric_limits<std::uint64_t>::max() >> shift))
    throw std::invalid_argument("size list: '" + shown + "' is too large");
  return value << shift;
}

}  // namespace

std::vector<std::uint64_t> parse_size_list(std::string_view list) {
  std::vector<std::uint64_t> sizes;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = list.find(',', start);
    sizes.push_back(parse_one(list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return sizes;
}

std::string format_size(std::uint64_t n) {
  if (n != 0 && n % (1ull << 30) == 0) return std::to_string(n >> 30) + "G";
  if (n != 0 && n % (1ull << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n != 0 && n % (1ull << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

}  // namespace canopy::bench
