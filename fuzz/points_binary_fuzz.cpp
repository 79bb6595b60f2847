// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the binary point reader over arbitrary bytes.
// Rejections must be canopy::trees::input_error; anything else escaping is a crash. An accepted
// input must be exactly the canonical encoding of the points read (header, count, records), and
// the points must pass check_accepted_points.
#include <canopy/trees/errors.hpp>
#include <canopy/trees/point_io.hpp>
#include <canopy/trees/threads.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "fuzz_checks.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  canopy::trees::set_host_threads(1);  // one input at a time; no thread start-up per input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace canopy::trees;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const auto accepted = canopy::fuzz::accepted_points("fuzz.bin", [&] { return parse_points_binary(bytes, "fuzz.bin"); });
  if (!accepted) return 0;
  const std::vector<point>& points = *accepted;
  // Accepted: the input is the canonical file of these points, byte for byte.
  CANOPY_FUZZ_CHECK(size == point_file_header_bytes + 16 * points.size());
  CANOPY_FUZZ_CHECK(std::memcmp(data, point_file_magic, 8) == 0);
  std::uint64_t count = 0;
  std::memcpy(&count, data + 16, sizeof count);
  CANOPY_FUZZ_CHECK(count == points.size());
  CANOPY_FUZZ_CHECK(points.empty() || std::memcmp(data + point_file_header_bytes, points.data(), 16 * points.size()) == 0);
  canopy::fuzz::check_accepted_points(points, size > 24 ? data[24] : 0);
  return 0;
}
