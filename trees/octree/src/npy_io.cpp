// SPDX-License-Identifier: Apache-2.0
// NumPy .npy reader: (N, 3) or (N, 4) float32/float64 arrays (format described in
// point_formats.hpp).
#include <canopy/trees/errors.hpp>
#include <canopy/trees/point_formats.hpp>

#include "byte_stream.hpp"
#include "point_checks.hpp"

#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::trees {

namespace {

constexpr char magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
constexpr std::size_t max_header_text = 1 << 16;  // numpy writes a few hundred bytes; it refuses > 10 kB to read
constexpr std::size_t chunk_values = 4 * 8192;

struct npy_header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;
};

// The header's Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (N, 3), }
// (either quote, any spacing, trailing commas), exactly these three keys.
class dict_parser {
 public:
  dict_parser(std::string_view text, const std::string& file) : s_(text), file_(file) {}

  npy_header parse() {
    npy_header h;
    bool seen[3] = {false, false, false};
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') {
        ++i_;
        break;
      }
      const std::string key = string_literal();
      expect(':');
      skip_space();
      if (key == "descr") {
        h.descr = string_literal();
        if (seen[0]) fail("'descr' appears twice");
        seen[0] = true;
      } else if (key == "fortran_order") {
        if (s_.substr(i_).starts_with("True")) {
          h.fortran_order = true;
          i_ += 4;
        } else if (s_.substr(i_).starts_with("False")) {
          i_ += 5;
        } else {
          fail("'fortran_order' is not True or False");
        }
        if (seen[1]) fail("'fortran_order' appears twice");
        seen[1] = true;
      } else if (key == "shape") {
        h.shape = tuple();
        if (seen[2]) fail("'shape' appears twice");
        seen[2] = true;
      } else {
        fail("unexpected key " + quoted_bytes(key));
      }
      skip_space();
      if (peek() == ',') {
        ++i_;
      } else if (peek() != '}') {
        fail("expected ',' or '}' at offset " + std::to_string(i_));
      }
    }
    skip_space();
    if (i_ != s_.size()) fail("junk after the dict at offset " + std::to_string(i_));
    if (!seen[0] || !seen[1] || !seen[2]) fail("the dict must have 'descr', 'fortran_order' and 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const { throw input_error(file_, "npy header: " + problem); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "' at offset " + std::to_string(i_));
    ++i_;
  }
  std::string string_literal() {
    skip_space();
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string at offset " + std::to_string(i_));
    const std::size_t end = s_.find(q, i_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string v(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return v;
  }
  std::vector<std::uint64_t> tuple() {
    std::vector<std::uint64_t> v;
    expect('(');
    for (;;) {
      skip_space();
      if (peek() == ')') {
        ++i_;
        return v;
      }
      std::uint64_t n = 0;
      const auto [end, ec] = std::from_chars(s_.data() + i_, s_.data() + s_.size(), n);
      if (ec != std::errc{}) fail("shape entries must be non-negative integers");
      i_ = static_cast<std::size_t>(end - s_.data());
      if (v.size() >= 8) fail("shape has too many dimensions");
      v.push_back(n);
      skip_space();
      if (peek() == ',') ++i_;
      else if (peek() != ')') fail("expected ',' or ')' in shape at offset " + std::to_string(i_));
    }
  }

  std::string_view s_;
  const std::string& file_;
  std::size_t i_ = 0;
};

std::vector<point> read_npy(detail::byte_stream& in) {
  const std::string& file = in.source();
  unsigned char pre[10];
  if (in.size() < 10 || !in.read(pre, 8)) {
    throw input_error(file, "truncated npy header: " + std::to_string(in.size()) + " bytes");
  }
  if (std::memcmp(pre, magic, sizeof magic) != 0) throw input_error(file, "not a .npy file (magic is not \"\\x93NUMPY\")");
  const int major = pre[6];
  const int minor = pre[7];
  if (major < 1 || major > 3 || minor != 0) {
    throw input_error(file, "unsupported npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                                " (this build reads 1.0, 2.0 and 3.0)");
  }
  std::uint32_t header_len = 0;
  if (major == 1) {
    if (!in.read(pre + 8, 2)) throw input_error(file, "truncated npy header");
    header_len = detail::load<std::uint16_t>(pre + 8, false);
  } else {
    unsigned char b[4];
    if (!in.read(b, 4)) throw input_error(file, "truncated npy header");
    header_len = detail::load<std::uint32_t>(b, false);
  }
  if (header_len > max_header_text) {
    throw input_error(file, "npy header of " + std::to_string(header_len) + " bytes is implausibly long (limit 64 KiB)");
  }
  if (header_len > in.remaining()) {
    throw input_error(file, "truncated npy header: it is " + std::to_string(header_len) + " bytes but " +
                                std::to_string(in.remaining()) + " follow");
  }
  std::string text(header_len, '\0');
  in.read(text.data(), header_len);
  const npy_header h = dict_parser(text, file).parse();

  bool big = false;
  std::size_t item = 0;
  if (h.descr == "<f4" || h.descr == ">f4") item = 4;
  if (h.descr == "<f8" || h.descr == ">f8") item = 8;
  if (item == 0) throw input_error(file, "dtype " + quoted_bytes(h.descr) + " is not supported (only <f4 >f4 <f8 >f8)");
  big = h.descr[0] == '>';
  if (h.shape.size() != 2 || (h.shape[1] != 3 && h.shape[1] != 4)) {
    std::string shape = "(";
    for (std::size_t k = 0; k < h.shape.size(); ++k) shape += (k ? ", " : "") + std::to_string(h.shape[k]);
    throw input_error(file, "shape " + shape + (h.shape.size() == 1 ? ",)" : ")") +
                                " is not (N, 3) (x, y, z) or (N, 4) (x, y, z, m)");
  }
  const std::uint64_t n = h.shape[0];
  const std::uint64_t cols = h.shape[1];
  const std::uint64_t data = in.remaining();
  if (n > data / (cols * item)) {
    throw input_error(file, "truncated data: the shape promises " + std::to_string(n) + " rows of " +
                                std::to_string(cols * item) + " bytes but only " + std::to_string(data) +
                                " bytes follow the header");
  }
  if (data != n * cols * item) {
    throw input_error(file, "shape disagrees with file size: " + std::to_string(n) + " rows (" +
                                std::to_string(n * cols * item) + " bytes) but " + std::to_string(data) +
                                " bytes follow the header");
  }
  std::vector<point> points(static_cast<std::size_t>(n), point{0.0f, 0.0f, 0.0f, 1.0f});
  // C order: row after row. Fortran order: column after column (all x, then all y, ...). Either
  // way the values arrive in one pass, chunk by chunk, and go straight to their point.
  std::vector<unsigned char> chunk;
  const std::uint64_t values = n * cols;
  for (std::uint64_t done = 0; done < values;) {
    const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(values - done, chunk_values));
    chunk.resize(k * item);
    if (!in.read(chunk.data(), chunk.size())) throw input_error(file, "read failed in the data");
    for (std::size_t j = 0; j < k; ++j) {
      const std::uint64_t index = done + j;
      const std::uint64_t row = h.fortran_order ? index % n : index / cols;
      const std::uint64_t col = h.fortran_order ? index / n : index % cols;
      const unsigned char* v = chunk.data() + j * item;
      float f = 0.0f;
      if (item == 4) {
        f = detail::load<float>(v, big);
      } else {
        const double d = detail::load<double>(v, big);
        f = static_cast<float>(d);
        if (std::string problem = detail::narrowing_problem(d, static_cast<int>(col)); !problem.empty())
          throw input_error(file, "row " + std::to_string(row) + ": " + problem);
      }
      point& p = points[static_cast<std::size_t>(row)];
      (col == 0 ? p.x : col == 1 ? p.y : col == 2 ? p.z : p.m) = f;
    }
    done += k;
  }
  for (std::size_t r = 0; r < points.size(); ++r) {
    if (std::string problem = detail::point_problem(points[r]); !problem.empty()) {
      throw input_error(file, "row " + std::to_string(r) + ": " + problem);
    }
  }
  return points;
}

}  // namespace

std::vector<point> read_points_npy(const std::filesystem::path& path) {
  detail::byte_stream in = detail::file_stream(path);
  return read_npy(in);
}

std::vector<point> parse_points_npy(std::span<const std::byte> bytes, std::string_view source) {
  detail::byte_stream in(bytes, std::string(source));
  return read_npy(in);
}

}  // namespace canopy::trees
