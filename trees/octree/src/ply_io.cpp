// SPDX-License-Identifier: Apache-2.0
// PLY point-cloud reader: ascii and binary, the vertex element's x, y, z and mass (format described
// in point_formats.hpp).
#include <canopy/trees/errors.hpp>
#include <canopy/trees/point_formats.hpp>

#include "byte_stream.hpp"
#include "point_checks.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::trees {

namespace {

// An element's name in a message: as it is when it is a plain word, else quoted (errors.hpp), so
// that a name with control bytes or a huge one cannot garble the one-line message.
std::string label(std::string_view name) {
  const bool plain = !name.empty() && name.size() <= 40 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  return plain ? std::string(name) : quoted_bytes(name);
}

enum class encoding { ascii, little, big };

struct scalar_type {
  std::string_view name;
  std::string_view alias;
  std::size_t bytes;
  bool is_float;
  bool is_signed;
};
constexpr scalar_type scalar_types[] = {
    {"char", "int8", 1, false, true},     {"uchar", "uint8", 1, false, false}, {"short", "int16", 2, false, true},
    {"ushort", "uint16", 2, false, false}, {"int", "int32", 4, false, true},    {"uint", "uint32", 4, false, false},
    {"float", "float32", 4, true, true},   {"double", "float64", 8, true, true}};

struct property {
  std::string name;
  const scalar_type* type = nullptr;        // the value's type (a list's item type)
  const scalar_type* count_type = nullptr;  // set for a list property
};

struct element {
  std::string name;
  std::uint64_t count = 0;
  std::vector<property> properties;
};

constexpr std::size_t max_header_bytes = 1 << 20;  // real headers are a few hundred bytes

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> w;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) w.push_back(line.substr(start, i - start));
  }
  return w;
}

class ply_reader {
 public:
  explicit ply_reader(detail::byte_stream& in) : in_(in), file_(in.source()) {}

  std::vector<point> read() {
    read_header();
    std::vector<point> points;
    for (const element& e : elements_) {
      if (e.properties.empty()) continue;  // holds no bytes, whatever its count
      const bool vertex = &e == vertex_;
      if (vertex) {
        // Fail before allocating for a count the file cannot hold: binary instances take at least
        // their fixed bytes, ascii ones at least two characters a property.
        std::uint64_t min_bytes = 0;
        for (const property& p : e.properties) min_bytes += enc_ == encoding::ascii ? 2 : (p.count_type ? p.count_type->bytes : p.type->bytes);
        if (e.count > (in_.remaining() + 1) / min_bytes) {
          throw input_error(file_, "truncated data: the header promises " + std::to_string(e.count) +
                                       " vertices, at least " + std::to_string(min_bytes) + " bytes each, but only " +
                                       std::to_string(in_.remaining()) + " bytes follow the header");
        }
        points.reserve(static_cast<std::size_t>(e.count));
      }
      std::vector<double> values(e.properties.size());
      for (std::uint64_t i = 0; i < e.count; ++i) {
        if (enc_ == encoding::ascii) begin_line();
        for (std::size_t k = 0; k < e.properties.size(); ++k) {
          const property& p = e.properties[k];
          if (p.count_type != nullptr) {
            const double n = value(*p.count_type, e, i, p);
            if (n < 0 || n != std::floor(n)) {
              throw input_error(file_, label(e.name) + " " + std::to_string(i) + ": list " + quoted_bytes(p.name) + " has length " + std::to_string(n));
            }
            for (std::uint64_t j = 0; j < static_cast<std::uint64_t>(n); ++j) (void)value(*p.type, e, i, p);
          } else {
            values[k] = value(*p.type, e, i, p);
          }
        }
        if (enc_ == encoding::ascii) end_line(e, i);
        if (vertex) {
          const std::optional<std::size_t> fields[4] = {x_, y_, z_, mass_};
          for (int f = 0; f < 4; ++f) {
            if (!fields[f]) continue;
            if (std::string problem = detail::narrowing_problem(values[*fields[f]], f); !problem.empty())
              throw input_error(file_, "vertex " + std::to_string(i) + ": " + problem);
          }
          const point pt{static_cast<float>(values[x_]), static_cast<float>(values[y_]), static_cast<float>(values[z_]),
                         mass_ ? static_cast<float>(values[*mass_]) : 1.0f};
          if (std::string problem = detail::point_problem(pt); !problem.empty()) {
            throw input_error(file_, "vertex " + std::to_string(i) + ": " + problem);
          }
          points.push_back(pt);
        }
      }
    }
    if (enc_ == encoding::ascii) {
      for (int c = in_.get(); c != -1; c = in_.get()) {
        if (!is_space(c)) throw input_error(file_, "data after the last element at byte " + std::to_string(in_.offset() - 1));
      }
    } else if (in_.remaining() != 0) {
      throw input_error(file_, std::to_string(in_.remaining()) + " bytes after the last element");
    }
    return points;
  }

 private:
  static bool is_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  static bool is_blank(int c) { return c == ' ' || c == '\t' || c == '\r'; }  // within a line

  // ASCII data is one element instance per line (the PLY format; plyfile and other readers want it
  // so): a line with too few or too many values is refused, never completed from the next line.
  // Empty lines between instances are skipped.
  void begin_line() {
    if (line_ended_) ++line_;
    for (int c = in_.peek(); c != -1 && is_space(c); c = in_.peek()) {
      if (c == '\n') ++line_;
      (void)in_.get();
    }
    line_ended_ = false;
    values_in_line_ = 0;
  }

  void end_line(const element& e, std::uint64_t i) {
    if (line_ended_) return;
    int c = in_.get();
    while (is_blank(c)) c = in_.get();
    if (c == '\n') {
      line_ended_ = true;
      return;
    }
    if (c == -1) return;  // the file's last line, ended by spaces
    throw input_error(file_, "line " + std::to_string(line_) + ": more values than the " +
                                 std::to_string(values_in_line_) + " of " + label(e.name) + " " + std::to_string(i) +
                                 " (one " + label(e.name) + " per line)");
  }

  std::string header_line(std::size_t number) {
    std::string line;
    for (;;) {
      const int c = in_.get();
      if (c == -1) throw input_error(file_, "truncated header: the file ends in line " + std::to_string(number) + " before end_header");
      if (c == '\n') break;
      if (in_.offset() > max_header_bytes) throw input_error(file_, "header longer than 1 MiB without end_header");
      line.push_back(static_cast<char>(c));
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  }

  const scalar_type* type_named(std::string_view name, std::size_t line) const {
    for (const scalar_type& t : scalar_types) {
      if (name == t.name || name == t.alias) return &t;
    }
    throw input_error(file_, "header line " + std::to_string(line) + ": unknown property type " + quoted_bytes(name));
  }

  void read_header() {
    if (header_line(1) != "ply") throw input_error(file_, "not a PLY file: the first line is not \"ply\"");
    bool have_format = false;
    for (std::size_t number = 2;; ++number) {
      const std::string line = header_line(number);
      const auto w = words(line);
      const std::string where = "header line " + std::to_string(number);
      if (w.empty()) throw input_error(file_, where + " is empty");
      if (w[0] == "comment" || w[0] == "obj_info") continue;
      if (w[0] == "end_header") {
        if (w.size() != 1) throw input_error(file_, where + ": junk after end_header");
        line_ = number + 1;
        break;
      }
      if (w[0] == "format") {
        if (have_format) throw input_error(file_, where + ": a second format line");
        if (w.size() != 3 || w[2] != "1.0") throw input_error(file_, where + ": expected \"format ENCODING 1.0\"");
        if (w[1] == "ascii") enc_ = encoding::ascii;
        else if (w[1] == "binary_little_endian") enc_ = encoding::little;
        else if (w[1] == "binary_big_endian") enc_ = encoding::big;
        else throw input_error(file_, where + ": unknown encoding " + quoted_bytes(w[1]));
        have_format = true;
      } else if (w[0] == "element") {
        if (w.size() != 3) throw input_error(file_, where + ": expected \"element NAME COUNT\"");
        element e;
        e.name = std::string(w[1]);
        const auto [end, ec] = std::from_chars(w[2].data(), w[2].data() + w[2].size(), e.count);
        if (ec != std::errc{} || end != w[2].data() + w[2].size()) {
          throw input_error(file_, where + ": element count " + quoted_bytes(w[2]) + " is not a non-negative integer");
        }
        elements_.push_back(std::move(e));
      } else if (w[0] == "property") {
        if (elements_.empty()) throw input_error(file_, where + ": property before any element");
        property p;
        if (w.size() == 5 && w[1] == "list") {
          p.count_type = type_named(w[2], number);
          p.type = type_named(w[3], number);
          if (p.count_type->is_float) throw input_error(file_, where + ": a list count must have an integer type");
          p.name = std::string(w[4]);
        } else if (w.size() == 3 && w[1] != "list") {
          p.type = type_named(w[1], number);
          p.name = std::string(w[2]);
        } else {
          throw input_error(file_, where + ": expected \"property TYPE NAME\" or \"property list COUNT_TYPE TYPE NAME\"");
        }
        elements_.back().properties.push_back(std::move(p));
      } else {
        throw input_error(file_, where + ": unknown keyword " + quoted_bytes(w[0]));
      }
    }
    if (!have_format) throw input_error(file_, "no format line in the header");
    for (const element& e : elements_) {
      if (e.name != "vertex") continue;
      if (vertex_ != nullptr) throw input_error(file_, "two vertex elements");
      vertex_ = &e;
    }
    if (vertex_ == nullptr) throw input_error(file_, "no vertex element");
    std::optional<std::size_t> weight;
    std::optional<std::size_t> idx[3];
    for (std::size_t k = 0; k < vertex_->properties.size(); ++k) {
      const property& p = vertex_->properties[k];
      std::optional<std::size_t>* slot = p.name == "x" ? &idx[0] : p.name == "y" ? &idx[1] : p.name == "z" ? &idx[2]
                                        : p.name == "mass" ? &mass_ : p.name == "weight" ? &weight : nullptr;
      if (slot == nullptr) continue;
      if (p.count_type != nullptr) throw input_error(file_, "vertex property " + quoted_bytes(p.name) + " is a list, not a number");
      if (slot->has_value()) throw input_error(file_, "vertex property " + quoted_bytes(p.name) + " appears twice");
      *slot = k;
    }
    for (int a = 0; a < 3; ++a) {
      if (!idx[a]) throw input_error(file_, std::string("the vertex element has no '") + "xyz"[a] + "' property");
    }
    x_ = *idx[0];
    y_ = *idx[1];
    z_ = *idx[2];
    if (!mass_) mass_ = weight;
  }

  double value(const scalar_type& t, const element& e, std::uint64_t i, const property& p) {
    if (enc_ == encoding::ascii) return ascii_value(t, e, i, p);
    unsigned char b[8];
    if (!in_.read(b, t.bytes)) {
      throw input_error(file_, "truncated data: the file ends in " + label(e.name) + " " + std::to_string(i) + " of " +
                                   std::to_string(e.count) + " (property " + quoted_bytes(p.name) + ")");
    }
    const bool big = enc_ == encoding::big;
    if (t.is_float) return t.bytes == 4 ? detail::load<float>(b, big) : detail::load<double>(b, big);
    switch (t.bytes) {
      case 1: return t.is_signed ? static_cast<double>(static_cast<std::int8_t>(b[0])) : b[0];
      case 2: return t.is_signed ? detail::load<std::int16_t>(b, big) : detail::load<std::uint16_t>(b, big);
      default: return t.is_signed ? detail::load<std::int32_t>(b, big) : detail::load<std::uint32_t>(b, big);
    }
  }

  double ascii_value(const scalar_type& t, const element& e, std::uint64_t i, const property& p) {
    const auto line_too_short = [&] {
      return input_error(file_, "line " + std::to_string(line_) + ": " + label(e.name) + " " + std::to_string(i) +
                                    " ends after " + std::to_string(values_in_line_) + " values, before property " +
                                    quoted_bytes(p.name) + " (one " + label(e.name) + " per line)");
    };
    if (line_ended_) throw line_too_short();
    int c = in_.get();
    while (is_blank(c)) c = in_.get();
    if (c == '\n') throw line_too_short();
    token_.clear();
    bool too_long = false;
    while (c != -1 && !is_space(c)) {
      if (token_.size() < 64) token_.push_back(static_cast<char>(c));
      else too_long = true;
      c = in_.get();
    }
    const std::string where = label(e.name) + " " + std::to_string(i) + " property " + quoted_bytes(p.name);
    if (too_long) throw input_error(file_, where + ": a number longer than 64 characters (" + quoted_bytes(token_) + "...)");
    // A number the file ends in, with no line end after it, may have been cut short ("1.2345"
    // cut to "1.23" still reads): every PLY writer ends its lines, so that is truncation too.
    if (token_.empty() || c == -1) {
      throw input_error(file_, "truncated data: the file ends in " + label(e.name) + " " + std::to_string(i) + " of " +
                                   std::to_string(e.count) + " (property " + quoted_bytes(p.name) + ")");
    }
    ++values_in_line_;
    if (c == '\n') line_ended_ = true;
    std::string_view s = token_;
    if (s.starts_with('+')) s.remove_prefix(1);
    double v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec == std::errc::invalid_argument || end != s.data() + s.size()) {
      throw input_error(file_, where + ": " + quoted_bytes(token_) + " is not a number");
    }
    if (ec == std::errc::result_out_of_range) throw input_error(file_, where + ": " + quoted_bytes(token_) + " is out of range");
    if (!t.is_float) {
      if (!std::isfinite(v) || v != std::floor(v)) throw input_error(file_, where + ": " + quoted_bytes(token_) + " is not an integer");
      // The declared type's range: a binary file could not hold anything else, and a list count
      // beyond it would otherwise be cast to an integer out of range.
      const double bits = 8.0 * static_cast<double>(t.bytes);
      const double lo = t.is_signed ? -std::exp2(bits - 1) : 0.0;
      const double hi = t.is_signed ? std::exp2(bits - 1) - 1 : std::exp2(bits) - 1;
      if (v < lo || v > hi) throw input_error(file_, where + ": " + quoted_bytes(token_) + " is out of range for its integer type");
    }
    return v;
  }

  detail::byte_stream& in_;
  const std::string& file_;
  encoding enc_ = encoding::ascii;
  std::vector<element> elements_;
  const element* vertex_ = nullptr;
  std::size_t x_ = 0, y_ = 0, z_ = 0;
  std::optional<std::size_t> mass_;
  std::string token_;
  std::uint64_t line_ = 0;          // ASCII data: the line being read (the header's lines count)
  bool line_ended_ = false;         // the last value read ended its line
  std::size_t values_in_line_ = 0;  // values read from the current line
};

}  // namespace

std::vector<point> read_points_ply(const std::filesystem::path& path) {
  detail::byte_stream in = detail::file_stream(path);
  return ply_reader(in).read();
}

std::vector<point> parse_points_ply(std::span<const std::byte> bytes, std::string_view source) {
  detail::byte_stream in(bytes, std::string(source));
  return ply_reader(in).read();
}

}  // namespace canopy::trees
