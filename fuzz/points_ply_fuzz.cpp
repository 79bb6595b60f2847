// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the PLY reader over arbitrary bytes.
// Rejections must be canopy::trees::input_error; anything else escaping is a crash. An accepted
// input is detected as PLY and reads the same through read_points' dispatch (parse_points), and the
// points must pass check_accepted_points.
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
  const auto accepted = canopy::fuzz::accepted_points("fuzz.ply", [&] { return parse_points_ply(bytes, "fuzz.ply"); });
  if (!accepted) return 0;
  const std::vector<point>& points = *accepted;
  // Accepted: the first line was "ply", which detection must see too.
  CANOPY_FUZZ_CHECK(detect_point_format(bytes) == point_format::ply);
  const auto again = parse_points(bytes, {}, "fuzz.ply");
  CANOPY_FUZZ_CHECK(again.size() == points.size());
  CANOPY_FUZZ_CHECK(points.empty() || std::memcmp(again.data(), points.data(), points.size() * sizeof(point)) == 0);
  canopy::fuzz::check_accepted_points(points, size > 0 ? data[size - 1] : 0);
  return 0;
}
