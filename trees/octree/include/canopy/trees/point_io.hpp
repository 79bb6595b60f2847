// SPDX-License-Identifier: Apache-2.0
// Point files: Canopy's own formats (read and written) and the formats of other programs (read
// only; their readers are declared in point_formats.hpp, which documents exactly what each accepts).
//
// Canopy binary format (version 1), all little-endian, no padding:
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
// Other formats, read only (details and limits in point_formats.hpp):
//   tipsy   Tipsy snapshots, big-endian ("standard"/XDR) or little-endian ("native"), 28- or
//           32-byte header; gas, dark and star particles (read_options::family picks one family)
//   gadget  Gadget-1/2 snapshots, SnapFormat 1 or 2, either byte order, float32 or float64
//           positions; masses from the header's mass table or the MASS block
//           (read_options::gadget_type picks one particle type 0..5)
//   ply     PLY point clouds, ascii / binary_little_endian / binary_big_endian: the vertex
//           element's x, y, z, mass from a `mass` or `weight` property (else 1)
//   npy     NumPy .npy arrays, format 1.0/2.0/3.0, dtype <f4 >f4 <f8 >f8, shape (N, 3) (mass 1)
//           or (N, 4) (x, y, z, m), C or Fortran order
//
// read_points(path) picks the reader from the file's content (detect_point_format), not its name:
// magic numbers first ("CNPYPTS1", "\x93NUMPY", "ply", a Gadget record marker), then a Tipsy header
// whose counts are consistent, then the CSV header "x,y,z,m"; only content that none of these
// recognises falls back to the extension (.csv, .ply, .npy, .tipsy/.std, .gadget). detect_point_format
// calls anything else Canopy binary; read_points and parse_points refuse it (an empty file, or one
// recognised by nothing) with input_error saying which formats were looked for.
//
// Readers accept only finite coordinates and finite, non-negative masses. Everything else throws
// input_error whose source() is the path and whose problem() says what is wrong (and where: the
// point index or the CSV line number; for the other formats the particle, vertex or row).
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

enum class point_format { binary, csv, tipsy, gadget, ply, npy };

// "binary", "csv", "tipsy", "gadget", "ply", "npy".
const char* to_string(point_format format);

// The format a file is WRITTEN in: ".csv" (any case) -> csv, anything else -> binary. (Reading
// detects the format from the content instead: detect_point_format.)
point_format format_of(const std::filesystem::path& path);

// The format of a file from its first bytes (and, for Tipsy, nothing else: its header counts), by
// the rules above. `name` only breaks ties for content that no rule recognises. The first overload
// takes the whole file in memory; the second reads the first 512 bytes of `path` (input_error if
// it cannot be opened).
point_format detect_point_format(std::span<const std::byte> bytes, const std::filesystem::path& name = {});
point_format detect_point_format(const std::filesystem::path& path);

// Which particles of a snapshot to read. A choice that does not fit the file (a Tipsy family for a
// PLY file, say) is an input_error, not silently ignored.
enum class tipsy_family { all, gas, dark, star };
struct read_options {
  tipsy_family family = tipsy_family::all;  // Tipsy: all families (gas, dark, star in file order) or one
  int gadget_type = -1;                      // Gadget: -1 for all types (0..5 in file order), or one type
};

// "all"/"gas"/"dark"/"star" and back; parse_tipsy_family throws input_error for anything else.
const char* to_string(tipsy_family family);
tipsy_family parse_tipsy_family(std::string_view name);

// Reads the format detect_point_format(path) finds, any of the six.
std::vector<point> read_points(const std::filesystem::path& path);
std::vector<point> read_points(const std::filesystem::path& path, const read_options& options);
// The same over a whole file in memory.
std::vector<point> parse_points(std::span<const std::byte> bytes, const read_options& options = {},
                                std::string_view source = "<memory>");
std::vector<point> read_points_binary(const std::filesystem::path& path);
// Where part `part` of `parts` of `count` points begins: count * part / parts without overflow
// (part <= parts, parts >= 1). Part k is [part_begin(count, k, parts), part_begin(count, k + 1, parts)):
// read_points_binary_part reads it, and a distributed run generates or scatters points by it.
constexpr std::uint64_t part_begin(std::uint64_t count, std::uint64_t part, std::uint64_t parts) {
  return count / parts * part + count % parts * part / parts;
}

// Part `part` of `parts` of a Canopy binary file: its points [count * part / parts,
// count * (part + 1) / parts), read with one seek, so that a rank of a distributed run reads only
// its share (the parts of all ranks are the file, in order). The header is checked as by
// read_points_binary; an invalid point's message gives its index in the whole file. `total`, when
// given, receives the file's point count. Throws input_error for parts < 1 or part outside [0, parts).
std::vector<point> read_points_binary_part(const std::filesystem::path& path, std::size_t part, std::size_t parts,
                                           std::uint64_t* total = nullptr);
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
