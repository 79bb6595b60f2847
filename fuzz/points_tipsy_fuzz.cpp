// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the Tipsy reader over arbitrary bytes.
// Rejections must be canopy::trees::input_error; anything else escaping is a crash. An accepted
// input must read the same when each family is read alone: gas, dark and star, concatenated, are
// all the points, and the points must pass check_accepted_points.
#include <canopy/trees/errors.hpp>
#include <canopy/trees/point_formats.hpp>
#include <canopy/trees/threads.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "fuzz_checks.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  canopy::trees::set_host_threads(1);  // one input at a time; no thread start-up per input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace canopy::trees;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const auto accepted = canopy::fuzz::accepted_points("fuzz.tipsy", [&] { return parse_points_tipsy(bytes, tipsy_family::all, "fuzz.tipsy"); });
  if (!accepted) return 0;
  const std::vector<point>& points = *accepted;
  std::vector<point> families;
  for (const tipsy_family f : {tipsy_family::gas, tipsy_family::dark, tipsy_family::star}) {
    const auto part = parse_points_tipsy(bytes, f, "fuzz.tipsy");  // accepted whole: no family may throw
    families.insert(families.end(), part.begin(), part.end());
  }
  CANOPY_FUZZ_CHECK(families.size() == points.size());
  CANOPY_FUZZ_CHECK(points.empty() || std::memcmp(families.data(), points.data(), points.size() * sizeof(point)) == 0);
  canopy::fuzz::check_accepted_points(points, size > 0 ? data[size - 1] : 0);
  return 0;
}
