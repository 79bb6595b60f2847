// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the NumPy .npy reader over arbitrary bytes.
// Rejections must be canopy::trees::input_error; anything else escaping is a crash. An accepted
// input is detected as .npy, its data fills the rest of the file exactly (N rows of 3 or 4 values
// of 4 or 8 bytes), and the points must pass check_accepted_points.
#include <canopy/trees/errors.hpp>
#include <canopy/trees/point_formats.hpp>
#include <canopy/trees/threads.hpp>

#include <cstddef>
#include <cstdint>
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
  const auto accepted = canopy::fuzz::accepted_points("fuzz.npy", [&] { return parse_points_npy(bytes, "fuzz.npy"); });
  if (!accepted) return 0;
  const std::vector<point>& points = *accepted;
  CANOPY_FUZZ_CHECK(detect_point_format(bytes) == point_format::npy);
  // Header: magic, version, length field (2 bytes in 1.0, 4 from 2.0), the dict; then the data.
  CANOPY_FUZZ_CHECK(size >= 10);
  const std::size_t length_bytes = data[6] == 1 ? 2 : 4;
  std::size_t header = 0;
  for (std::size_t k = 0; k < length_bytes; ++k) header |= static_cast<std::size_t>(data[8 + k]) << (8 * k);
  const std::size_t data_bytes = size - 8 - length_bytes - header;
  bool fits = false;
  for (const std::size_t row : {12u, 16u, 24u, 32u}) fits = fits || data_bytes == points.size() * row;
  CANOPY_FUZZ_CHECK(fits);
  canopy::fuzz::check_accepted_points(points, size > 0 ? data[size - 1] : 0);
  return 0;
}
