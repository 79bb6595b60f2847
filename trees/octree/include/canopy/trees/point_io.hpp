// SPDX-License-Identifier: Apache-2.0
// Point files.
//
// Binary format (version 1), all little-endian, no padding:
//   offset  0  char[8]   magic "CNPYPTS1"
//   offset  8  uint32    version = 1
//   offset 12  uint32    reserved, must be 0
//   offset 16  uint64    count
//   offset 24  count records of float32 x, y, z, m (16 bytes each)
// so the file size is exactly 24 + 16 * count bytes.
//
// CSV: a header line "x,y,z,m", then one point per line, four numbers separated by commas
// (spaces around the numbers and a trailing '\r' are accepted, empty lines are skipped). Numbers
// are written in the shortest form that reads back to the same float, so CSV round-trips exactly.
//
// Readers accept only finite coordinates and finite, non-negative masses. Everything else throws
// input_error whose source() is the path and whose problem() says what is wrong (and where: the
// point index or the CSV line number).
#pragma once

#include <canopy/trees/point.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

namespace canopy::trees {

inline constexpr char point_file_magic[8] = {'C', 'N', 'P', 'Y', 'P', 'T', 'S', '1'};
inline constexpr std::uint32_t point_file_version = 1;
inline constexpr std::size_t point_file_header_bytes = 24;

enum class point_format { binary, csv };

// ".csv" (any case) -> csv, anything else -> binary.
point_format format_of(const std::filesystem::path& path);

// Reads the format chosen by format_of(path).
std::vector<point> read_points(const std::filesystem::path& path);
std::vector<point> read_points_binary(const std::filesystem::path& path);
std::vector<point> read_points_csv(const std::filesystem::path& path);

// The same readers over bytes already in memory (a network buffer, a memory-mapped file, the
// fuzzers in fuzz/): the same checks and the same input_error messages, with `source` in place of
// the path. `bytes` is the whole file, header included; `text` the whole CSV file.
std::vector<point> parse_points_binary(std::span<const std::byte> bytes, std::string_view source = "<memory>");
std::vector<point> parse_points_csv(std::string_view text, std::string_view source = "<memory>");

// Writes to a temporary file in the same folder and renames it over `path`, so a failure never
// leaves a half-written file under that name. Throws std::filesystem::filesystem_error on I/O
// failure, and input_error (before creating anything) for points the readers would reject, so
// every file written can be read back.
void write_points(const std::filesystem::path& path, std::span<const point> points);
void write_points_binary(const std::filesystem::path& path, std::span<const point> points);
void write_points_csv(const std::filesystem::path& path, std::span<const point> points);

}  // namespace canopy::trees
