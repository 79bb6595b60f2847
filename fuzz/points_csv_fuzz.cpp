// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the CSV point reader over arbitrary text.
// Rejections must be canopy::trees::input_error; anything else escaping is a crash. Accepted
// points must round-trip: written back in the shortest form (as write_points_csv does) and read
// again, they are the same floats bit for bit.
#include <canopy/trees/errors.hpp>
#include <canopy/trees/point_io.hpp>
#include <canopy/trees/threads.hpp>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz_checks.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  canopy::trees::set_host_threads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace canopy::trees;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto accepted = canopy::fuzz::accepted_points("fuzz.csv", [&] { return parse_points_csv(text, "fuzz.csv"); });
  if (!accepted) return 0;
  const std::vector<point>& points = *accepted;
  std::string again = "x,y,z,m\n";
  char number[32];
  for (const point& p : points) {
    const float v[4] = {p.x, p.y, p.z, p.m};
    for (int i = 0; i < 4; ++i) {
      const auto r = std::to_chars(number, number + sizeof number, v[i]);
      again.append(number, r.ptr);
      again.push_back(i < 3 ? ',' : '\n');
    }
  }
  const std::vector<point> back = parse_points_csv(again, "round trip");  // must not throw
  CANOPY_FUZZ_CHECK(back.size() == points.size());
  CANOPY_FUZZ_CHECK(back.empty() || std::memcmp(back.data(), points.data(), back.size() * sizeof(point)) == 0);
  canopy::fuzz::check_accepted_points(points, size > 0 ? data[size - 1] : 0);
  return 0;
}
