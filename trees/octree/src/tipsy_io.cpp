// SPDX-License-Identifier: Apache-2.0
// Tipsy snapshot reader (format described in point_formats.hpp).
#include <canopy/trees/errors.hpp>
#include <canopy/trees/point_formats.hpp>

#include "byte_stream.hpp"
#include "point_checks.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace canopy::trees {

namespace {

struct family_layout {
  const char* name;
  std::size_t floats;  // record length in float32; mass, x, y, z come first in every family
};
constexpr std::array<family_layout, 3> families = {{{"gas", 12}, {"dark", 9}, {"star", 11}}};

constexpr std::size_t short_header = 28;
constexpr std::size_t padded_header = 32;
constexpr std::size_t chunk_records = 8192;

std::vector<point> read_tipsy(detail::byte_stream& in, tipsy_family family) {
  const std::string& file = in.source();
  unsigned char h[short_header];
  if (in.size() < short_header || !in.read(h, sizeof h)) {
    throw input_error(file, "truncated Tipsy header: " + std::to_string(in.size()) + " bytes, the header needs " +
                                std::to_string(short_header) + " (or " + std::to_string(padded_header) + " padded)");
  }
  // The byte order is the one in which ndim reads 3 (it is 3 in every 3-D Tipsy file).
  bool big = true;
  if (detail::load<std::int32_t>(h + 12, true) != 3) {
    if (detail::load<std::int32_t>(h + 12, false) != 3) {
      throw input_error(file, "not a Tipsy file: ndim is " + std::to_string(detail::load<std::int32_t>(h + 12, true)) +
                                  " big-endian and " + std::to_string(detail::load<std::int32_t>(h + 12, false)) +
                                  " little-endian, expected 3");
    }
    big = false;
  }
  const std::int64_t nbodies = detail::load<std::int32_t>(h + 8, big);
  const std::int64_t count[3] = {detail::load<std::int32_t>(h + 16, big), detail::load<std::int32_t>(h + 20, big),
                                 detail::load<std::int32_t>(h + 24, big)};
  for (int f = 0; f < 3; ++f) {
    if (count[f] < 0) {
      throw input_error(file, std::string("negative particle count n") + (f == 0 ? "sph" : families[f].name) +
                                  " = " + std::to_string(count[f]));
    }
  }
  if (nbodies != count[0] + count[1] + count[2]) {
    throw input_error(file, "header counts disagree: nbodies = " + std::to_string(nbodies) +
                                " but nsph + ndark + nstar = " + std::to_string(count[0] + count[1] + count[2]));
  }
  std::uint64_t data_bytes = 0;
  for (int f = 0; f < 3; ++f) data_bytes += static_cast<std::uint64_t>(count[f]) * families[f].floats * 4;
  // Both header forms are in use; the size tells which one this file has (they differ by 4 bytes,
  // so at most one fits).
  std::size_t header = 0;
  if (in.size() == padded_header + data_bytes) {
    header = padded_header;
  } else if (in.size() == short_header + data_bytes) {
    header = short_header;
  } else {
    const std::string promise = "the header promises " + std::to_string(count[0]) + " gas, " +
                                std::to_string(count[1]) + " dark and " + std::to_string(count[2]) + " star particles (" +
                                std::to_string(data_bytes) + " bytes after a 28- or 32-byte header) but the file has " +
                                std::to_string(in.size()) + " bytes";
    throw input_error(file, (in.size() < short_header + data_bytes ? "truncated data: " : "count disagrees with file size: ") +
                                promise);
  }
  in.skip(header - short_header);

  std::size_t total = 0;
  for (int f = 0; f < 3; ++f) {
    if (family == tipsy_family::all || static_cast<int>(family) == f + 1) total += static_cast<std::size_t>(count[f]);
  }
  std::vector<point> points;
  points.reserve(total);  // the counts fit in the file: checked above
  std::vector<unsigned char> chunk;
  for (int f = 0; f < 3; ++f) {
    const std::size_t record = families[f].floats * 4;
    if (family != tipsy_family::all && static_cast<int>(family) != f + 1) {
      in.skip(static_cast<std::uint64_t>(count[f]) * record);
      continue;
    }
    for (std::int64_t done = 0; done < count[f];) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::int64_t>(count[f] - done, chunk_records));
      chunk.resize(n * record);
      if (!in.read(chunk.data(), chunk.size())) throw input_error(file, "read failed in the " + std::string(families[f].name) + " particles");
      for (std::size_t i = 0; i < n; ++i) {
        const unsigned char* r = chunk.data() + i * record;
        const point p{detail::load<float>(r + 4, big), detail::load<float>(r + 8, big), detail::load<float>(r + 12, big),
                      detail::load<float>(r, big)};
        if (std::string problem = detail::point_problem(p); !problem.empty()) {
          throw input_error(file, std::string(families[f].name) + " particle " + std::to_string(done + static_cast<std::int64_t>(i)) +
                                      ": " + problem);
        }
        points.push_back(p);
      }
      done += static_cast<std::int64_t>(n);
    }
  }
  return points;
}

}  // namespace

std::vector<point> read_points_tipsy(const std::filesystem::path& path, tipsy_family family) {
  detail::byte_stream in = detail::file_stream(path);
  return read_tipsy(in, family);
}

std::vector<point> parse_points_tipsy(std::span<const std::byte> bytes, tipsy_family family, std::string_view source) {
  detail::byte_stream in(bytes, std::string(source));
  return read_tipsy(in, family);
}

}  // namespace canopy::trees
