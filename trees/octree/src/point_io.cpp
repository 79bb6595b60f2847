// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/errors.hpp>
#include <canopy/trees/point_formats.hpp>
#include <canopy/trees/point_io.hpp>

#include <canopy/trees/atomic_file.hpp>

#include "byte_stream.hpp"
#include "point_checks.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace canopy::trees {

// The binary records are the in-memory `point`s, read and written in one block. That is only the
// documented little-endian IEEE-754 layout on such hosts, which every platform we build for is.
static_assert(std::endian::native == std::endian::little, "point files are little-endian; add byte swapping");
static_assert(std::numeric_limits<float>::is_iec559, "point files hold IEEE-754 float32");
static_assert(sizeof(point) == 16 && alignof(point) == 16);

namespace detail {

namespace {
std::string describe(float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}
}  // namespace

std::string point_problem(const point& p) {
  static constexpr const char* names[] = {"x", "y", "z", "m"};
  const float v[4] = {p.x, p.y, p.z, p.m};
  for (int i = 0; i < 4; ++i) {
    if (!std::isfinite(v[i])) {
      return std::string(i < 3 ? "non-finite coordinate " : "non-finite mass ") + names[i] + " = " + describe(v[i]);
    }
  }
  if (p.m < 0.0f) return "negative mass m = " + describe(p.m);
  return {};
}

std::string narrowing_problem(double value, int field) {
  static constexpr const char* names[] = {"x", "y", "z", "m"};
  if (!std::isfinite(value) || std::isfinite(static_cast<float>(value))) return {};
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s %s = %.17g is beyond float32's range (+-3.4028235e+38)",
                field < 3 ? "coordinate" : "mass", names[field & 3], value);
  return buf;
}

void validate_points(const std::string& source, std::span<const point> points, std::size_t first_index) {
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (std::string problem = point_problem(points[i]); !problem.empty()) {
      throw input_error(source, "point " + std::to_string(first_index + i) + ": " + problem);
    }
  }
}

std::ifstream open_for_reading(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) throw input_error(path.string(), "no such file");
  if (ec) throw input_error(path.string(), "cannot open: " + ec.message());
  if (status.type() != std::filesystem::file_type::regular) throw input_error(path.string(), "not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw input_error(path.string(), "cannot open for reading");
  // /proc and /sys files say 0 bytes and have contents: the readers go by the size, so such a file
  // would be "0 bytes" of a points file.
  if (std::filesystem::file_size(path, ec) == 0 && !ec && in.peek() != std::ifstream::traits_type::eof())
    throw input_error(path.string(), "its size reads as 0 bytes but it has contents (a /proc or /sys file?): not a points file");
  in.clear();
  return in;
}

}  // namespace detail

using detail::open_for_reading;
using detail::point_problem;
using detail::validate_points;

namespace {

constexpr std::size_t record_bytes = sizeof(point);

std::uint32_t load_u32(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
std::uint64_t load_u64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Checks a binary header (the first point_file_header_bytes of a file of `size` bytes) and
// returns the point count it promises, which then fits exactly in the rest of the file.
std::uint64_t checked_count(const unsigned char* header, std::uintmax_t size, const std::string& file) {
  if (std::memcmp(header, point_file_magic, sizeof point_file_magic) != 0) {
    throw input_error(file, "not a Canopy point file (magic is not \"CNPYPTS1\")");
  }
  if (const std::uint32_t version = load_u32(header + 8); version != point_file_version) {
    throw input_error(file, "unsupported version " + std::to_string(version) + " (this build reads version " +
                                std::to_string(point_file_version) + ")");
  }
  if (const std::uint32_t reserved = load_u32(header + 12); reserved != 0) {
    throw input_error(file, "reserved header field is " + std::to_string(reserved) + ", must be 0");
  }
  const std::uint64_t count = load_u64(header + 16);
  const std::uintmax_t data_bytes = size - point_file_header_bytes;
  // Compare in the division's direction so that a huge count cannot overflow count * 16.
  if (count > data_bytes / record_bytes) {
    throw input_error(file, "truncated data: the header promises " + std::to_string(count) + " points (" +
                                (count <= std::numeric_limits<std::uint64_t>::max() / record_bytes
                                     ? std::to_string(count * record_bytes)
                                     : std::string("more than 2^64")) +
                                " bytes) but only " + std::to_string(data_bytes) + " bytes follow the header");
  }
  if (data_bytes != count * record_bytes) {
    throw input_error(file, "count disagrees with file size: the header says " + std::to_string(count) +
                                " points (" + std::to_string(count * record_bytes) + " bytes) but " +
                                std::to_string(data_bytes) + " bytes follow the header");
  }
  return count;
}

void check_header_size(std::uintmax_t size, const std::string& file) {
  if (size < point_file_header_bytes) {
    throw input_error(file, "truncated header: " + std::to_string(size) + " bytes, a point file needs at least " +
                                std::to_string(point_file_header_bytes));
  }
}

// The CSV grammar, one line at a time, shared by the file and the in-memory readers.
class csv_reader {
 public:
  explicit csv_reader(std::string file) : file_(std::move(file)) {}

  void line(std::string_view raw) {
    ++line_number_;
    const std::string_view text = trim(raw);
    if (!header_seen_) {
      if (text != "x,y,z,m") {
        throw input_error(file_, "line " + std::to_string(line_number_) + ": expected the header \"x,y,z,m\"");
      }
      header_seen_ = true;
      return;
    }
    if (text.empty()) return;
    float v[4];
    std::string_view rest = text;
    for (int field = 0; field < 4; ++field) {
      const std::size_t comma = rest.find(',');
      if ((comma == std::string_view::npos) != (field == 3)) {
        throw input_error(file_, "line " + std::to_string(line_number_) +
                                     ": expected 4 comma-separated numbers x,y,z,m, found " +
                                     std::to_string(std::count(text.begin(), text.end(), ',') + 1) + " fields");
      }
      const std::string_view token = trim(rest.substr(0, comma));
      // from_chars does not skip a leading '+'; accept it as people and other tools write it.
      const std::string_view digits = token.starts_with('+') ? token.substr(1) : token;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v[field]);
      if (digits.empty() || ec == std::errc::invalid_argument || end != digits.data() + digits.size()) {
        throw input_error(file_, "line " + std::to_string(line_number_) + ": field " + std::to_string(field + 1) +
                                     " is not a number: " + quoted_bytes(token));
      }
      if (ec == std::errc::result_out_of_range) {
        // Too small for float32: rounded to the nearest float (a denormal or 0), as the readers that
        // narrow float64 (npy, PLY, Gadget) do; only a value beyond float32's largest is refused.
        const double d = std::strtod(std::string(digits).c_str(), nullptr);
        if (std::abs(d) < 1.0) {
          v[field] = static_cast<float>(d);
          rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
          continue;
        }
        throw input_error(file_, "line " + std::to_string(line_number_) + ": field " + std::to_string(field + 1) +
                                     " is out of float32 range: " + quoted_bytes(token));
      }
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    const point p{v[0], v[1], v[2], v[3]};
    if (std::string problem = point_problem(p); !problem.empty()) {
      throw input_error(file_, "line " + std::to_string(line_number_) + ": " + problem);
    }
    points_.push_back(p);
  }

  std::size_t line_number() const { return line_number_; }
  const std::string& file() const { return file_; }

  std::vector<point> finish() {
    if (!header_seen_) throw input_error(file_, "empty file: expected the header \"x,y,z,m\"");
    return std::move(points_);
  }

 private:
  std::string file_;
  std::size_t line_number_ = 0;
  bool header_seen_ = false;
  std::vector<point> points_;
};

}  // namespace

point_format format_of(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".csv" ? point_format::csv : point_format::binary;
}

const char* to_string(point_format format) {
  switch (format) {
    case point_format::binary: return "binary";
    case point_format::csv: return "csv";
    case point_format::tipsy: return "tipsy";
    case point_format::gadget: return "gadget";
    case point_format::ply: return "ply";
    case point_format::npy: return "npy";
  }
  return "?";
}

const char* to_string(tipsy_family family) {
  switch (family) {
    case tipsy_family::all: return "all";
    case tipsy_family::gas: return "gas";
    case tipsy_family::dark: return "dark";
    case tipsy_family::star: return "star";
  }
  return "?";
}

tipsy_family parse_tipsy_family(std::string_view name) {
  for (tipsy_family f : {tipsy_family::all, tipsy_family::gas, tipsy_family::dark, tipsy_family::star}) {
    if (name == to_string(f)) return f;
  }
  throw input_error("tipsy family", quoted_bytes(name) + " is not gas, dark, star or all");
}

namespace {

constexpr std::size_t detect_bytes = 512;

// The detection rules of point_io.hpp over the first n bytes of a file.
point_format detect(const unsigned char* head, std::size_t n, const std::filesystem::path& name) {
  const auto starts_with = [&](std::string_view prefix) {
    return n >= prefix.size() && std::memcmp(head, prefix.data(), prefix.size()) == 0;
  };
  if (starts_with(std::string_view(point_file_magic, sizeof point_file_magic))) return point_format::binary;
  if (starts_with("\x93NUMPY")) return point_format::npy;
  if (starts_with("ply\n") || starts_with("ply\r\n")) return point_format::ply;
  // Gadget: the first Fortran record marker is 256 (format 1, the header) or 8 (format 2, the
  // label record "HEAD"), in either byte order. Strong evidence first: the header record's
  // trailing marker, or the label.
  const auto u32 = [&](std::size_t at, bool big) { return detail::load<std::uint32_t>(head + at, big); };
  bool gadget_marker = false;
  for (const bool big : {false, true}) {
    if (n < 4) break;
    if (u32(0, big) == 256) {
      gadget_marker = true;
      if (n >= 264 && u32(260, big) == 256) return point_format::gadget;
    }
    if (u32(0, big) == 8) {
      gadget_marker = true;
      if (n >= 8 && std::memcmp(head + 4, "HEAD", 4) == 0) return point_format::gadget;
    }
  }
  // Tipsy has no magic: a header with ndim == 3 (in one byte order) and consistent counts.
  if (n >= 28) {
    for (const bool big : {true, false}) {
      const auto i32 = [&](std::size_t at) { return detail::load<std::int32_t>(head + at, big); };
      const std::int64_t nsph = i32(16), ndark = i32(20), nstar = i32(24);
      if (i32(12) == 3 && nsph >= 0 && ndark >= 0 && nstar >= 0 && i32(8) == nsph + ndark + nstar) {
        return point_format::tipsy;
      }
    }
  }
  if (gadget_marker) return point_format::gadget;
  if (starts_with("x,y,z,m")) return point_format::csv;
  std::string ext = name.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == ".csv") return point_format::csv;
  if (ext == ".ply") return point_format::ply;
  if (ext == ".npy") return point_format::npy;
  if (ext == ".tipsy" || ext == ".std") return point_format::tipsy;
  if (ext == ".gadget") return point_format::gadget;
  return point_format::binary;
}

// detect() falls back to Canopy binary for a file it recognises by nothing; such a file is refused
// here, saying what was looked for, not with the binary reader's "magic is not ..." or "truncated
// header", which named one format of six.
void check_recognised(point_format format, const unsigned char* head, std::size_t n, const std::string& source) {
  if (format != point_format::binary || (n >= sizeof point_file_magic && std::memcmp(head, point_file_magic, sizeof point_file_magic) == 0))
    return;
  if (n == 0) throw input_error(source, "empty file (0 bytes): not a points file");
  throw input_error(source,
                    "not a points file: no format recognised (looked for the magic \"CNPYPTS1\" of Canopy binary, "
                    "\"\\x93NUMPY\" of NumPy or \"ply\" of PLY, the CSV header \"x,y,z,m\", a Tipsy or Gadget "
                    "header, then the extensions .csv, .ply, .npy, .tipsy, .std, .gadget)");
}

// A choice of family or type is an error for a file it cannot apply to.
void check_options(point_format format, const read_options& options, const std::string& source) {
  if (options.family != tipsy_family::all && format != point_format::tipsy) {
    throw input_error(source, std::string("a Tipsy family (") + to_string(options.family) + ") was chosen but this is a " +
                                  to_string(format) + " file");
  }
  if (options.gadget_type != -1 && format != point_format::gadget) {
    throw input_error(source, "a Gadget particle type (" + std::to_string(options.gadget_type) +
                                  ") was chosen but this is a " + to_string(format) + " file");
  }
}

}  // namespace

point_format detect_point_format(std::span<const std::byte> bytes, const std::filesystem::path& name) {
  return detect(reinterpret_cast<const unsigned char*>(bytes.data()), std::min(bytes.size(), detect_bytes), name);
}

point_format detect_point_format(const std::filesystem::path& path) {
  std::ifstream in = open_for_reading(path);
  unsigned char head[detect_bytes];
  in.read(reinterpret_cast<char*>(head), sizeof head);
  if (in.bad()) throw input_error(path.string(), "cannot read the first bytes");
  return detect(head, static_cast<std::size_t>(in.gcount()), path);
}

std::vector<point> read_points(const std::filesystem::path& path) { return read_points(path, read_options{}); }

std::vector<point> read_points(const std::filesystem::path& path, const read_options& options) {
  point_format format{};
  {
    std::ifstream in = open_for_reading(path);
    unsigned char head[detect_bytes];
    in.read(reinterpret_cast<char*>(head), sizeof head);
    if (in.bad()) throw input_error(path.string(), "cannot read the first bytes");
    const auto n = static_cast<std::size_t>(in.gcount());
    format = detect(head, n, path);
    check_recognised(format, head, n, path.string());
  }
  check_options(format, options, path.string());
  switch (format) {
    case point_format::csv: return read_points_csv(path);
    case point_format::tipsy: return read_points_tipsy(path, options.family);
    case point_format::gadget: return read_points_gadget(path, options.gadget_type);
    case point_format::ply: return read_points_ply(path);
    case point_format::npy: return read_points_npy(path);
    case point_format::binary: break;
  }
  return read_points_binary(path);
}

std::vector<point> parse_points(std::span<const std::byte> bytes, const read_options& options, std::string_view source) {
  const point_format format = detect_point_format(bytes);
  const std::string file(source);
  check_recognised(format, reinterpret_cast<const unsigned char*>(bytes.data()), std::min(bytes.size(), detect_bytes), file);
  check_options(format, options, file);
  switch (format) {
    case point_format::csv:
      return parse_points_csv(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), source);
    case point_format::tipsy: return parse_points_tipsy(bytes, options.family, source);
    case point_format::gadget: return parse_points_gadget(bytes, options.gadget_type, source);
    case point_format::ply: return parse_points_ply(bytes, source);
    case point_format::npy: return parse_points_npy(bytes, source);
    case point_format::binary: break;
  }
  return parse_points_binary(bytes, source);
}

void write_points(const std::filesystem::path& path, std::span<const point> points) {
  if (format_of(path) == point_format::csv) {
    write_points_csv(path, points);
  } else {
    write_points_binary(path, points);
  }
}

std::vector<point> read_points_binary(const std::filesystem::path& path) {
  std::ifstream in = open_for_reading(path);
  const std::uintmax_t size = std::filesystem::file_size(path);
  const std::string file = path.string();
  check_header_size(size, file);
  unsigned char header[point_file_header_bytes];
  if (!in.read(reinterpret_cast<char*>(header), sizeof header)) throw input_error(file, "cannot read the header");
  const std::uint64_t count = checked_count(header, size, file);
  std::vector<point> points(static_cast<std::size_t>(count));
  if (!in.read(reinterpret_cast<char*>(points.data()), static_cast<std::streamsize>(count * record_bytes))) {
    throw input_error(file, "read failed after " + std::to_string(in.gcount()) + " data bytes");
  }
  validate_points(file, points);
  return points;
}

std::vector<point> read_points_binary_part(const std::filesystem::path& path, std::size_t part, std::size_t parts,
                                           std::uint64_t* total) {
  const std::string file = path.string();
  if (parts < 1 || part >= parts)
    throw input_error(file, "part " + std::to_string(part) + " of " + std::to_string(parts) + " does not exist");
  std::ifstream in = open_for_reading(path);
  const std::uintmax_t size = std::filesystem::file_size(path);
  check_header_size(size, file);
  unsigned char header[point_file_header_bytes];
  if (!in.read(reinterpret_cast<char*>(header), sizeof header)) throw input_error(file, "cannot read the header");
  const std::uint64_t count = checked_count(header, size, file);
  if (total != nullptr) *total = count;
  const std::uint64_t begin = part_begin(count, part, parts), end = part_begin(count, part + 1, parts);
  std::vector<point> points(static_cast<std::size_t>(end - begin));
  in.seekg(static_cast<std::streamoff>(point_file_header_bytes + begin * record_bytes));
  if (!in.read(reinterpret_cast<char*>(points.data()), static_cast<std::streamsize>(points.size() * record_bytes))) {
    throw input_error(file, "read failed after " + std::to_string(in.gcount()) + " data bytes of part " +
                                std::to_string(part));
  }
  validate_points(file, points, static_cast<std::size_t>(begin));
  return points;
}

std::vector<point> parse_points_binary(std::span<const std::byte> bytes, std::string_view source) {
  const std::string file(source);
  check_header_size(bytes.size(), file);
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::uint64_t count = checked_count(data, bytes.size(), file);
  std::vector<point> points(static_cast<std::size_t>(count));
  if (count > 0) std::memcpy(points.data(), data + point_file_header_bytes, static_cast<std::size_t>(count) * record_bytes);
  validate_points(file, points);
  return points;
}

void write_points_binary(const std::filesystem::path& path, std::span<const point> points) {
  validate_points(path.string(), points);
  write_file_atomically(path, [&](std::ostream& out) {
    unsigned char header[point_file_header_bytes] = {};
    std::memcpy(header, point_file_magic, sizeof point_file_magic);
    const std::uint32_t version = point_file_version;
    const std::uint64_t count = points.size();
    std::memcpy(header + 8, &version, sizeof version);
    std::memcpy(header + 16, &count, sizeof count);
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    out.write(reinterpret_cast<const char*>(points.data()), static_cast<std::streamsize>(points.size_bytes()));
  });
}

std::vector<point> read_points_csv(const std::filesystem::path& path) {
  std::ifstream in = open_for_reading(path);
  csv_reader reader(path.string());
  std::string line;
  while (std::getline(in, line)) reader.line(line);
  if (in.bad()) throw input_error(reader.file(), "read failed at line " + std::to_string(reader.line_number() + 1));
  return reader.finish();
}

std::vector<point> parse_points_csv(std::string_view text, std::string_view source) {
  csv_reader reader{std::string(source)};
  // Lines as std::getline splits them: a final '\n' does not start another line.
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    reader.line(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  }
  return reader.finish();
}

void write_points_csv(const std::filesystem::path& path, std::span<const point> points) {
  validate_points(path.string(), points);
  write_file_atomically(path, [&](std::ostream& out) {
    std::string buffer = "x,y,z,m\n";
    buffer.reserve(1 << 20);
    char number[32];
    for (const point& p : points) {
      const float v[4] = {p.x, p.y, p.z, p.m};
      for (int i = 0; i < 4; ++i) {
        // Shortest representation that parses back to the same float: exact round trip.
        const auto r = std::to_chars(number, number + sizeof number, v[i]);
        buffer.append(number, r.ptr);
        buffer.push_back(i < 3 ? ',' : '\n');
      }
      if (buffer.size() >= (1 << 20) - 256) {
        out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        buffer.clear();
      }
    }
    out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
  });
}

}  // namespace canopy::trees
