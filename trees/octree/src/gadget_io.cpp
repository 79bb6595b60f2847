// SPDX-License-Identifier: Apache-2.0
// Gadget-1/2 snapshot reader, SnapFormat 1 and 2 (format described in point_formats.hpp).
#include <canopy/trees/errors.hpp>
#include <canopy/trees/point_formats.hpp>

#include "byte_stream.hpp"
#include "point_checks.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace canopy::trees {

namespace {

constexpr std::uint32_t header_bytes = 256;
constexpr std::uint32_t label_bytes = 8;  // format 2: char[4] label + int32 size of the next record
constexpr int types = 6;
constexpr std::size_t chunk_values = 3 * 8192;

std::uint32_t byte_swapped(std::uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}

std::string printable(const char* label) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    const unsigned char c = static_cast<unsigned char>(label[i]);
    s += (c >= 32 && c < 127) ? static_cast<char>(c) : '?';
  }
  return s;
}

class gadget_reader {
 public:
  gadget_reader(detail::byte_stream& in, int type) : in_(in), file_(in.source()), type_(type) {}

  std::vector<point> read() {
    unsigned char first[4];
    if (!in_.read(first, 4)) throw input_error(file_, "truncated Gadget header: the file has " + std::to_string(in_.size()) + " bytes");
    const std::uint32_t marker = detail::load<std::uint32_t>(first, false);
    if (marker == header_bytes || marker == label_bytes) {
      big_ = false;
    } else if (marker == byte_swapped(header_bytes) || marker == byte_swapped(label_bytes)) {
      big_ = true;
    } else {
      throw input_error(file_, "not a Gadget snapshot: the first record marker is " + std::to_string(marker) +
                                   ", not 256 (format 1) or 8 (format 2) in either byte order");
    }
    format2_ = detail::load<std::uint32_t>(first, big_) == label_bytes;
    pending_marker_ = detail::load<std::uint32_t>(first, big_);

    read_header();
    std::vector<point> points(selected_);
    if (total_ == 0) return points;
    std::size_t at = 0;  // a sum of up to six int32 counts: never an int
    for (int t = 0; t < types; ++t) {
      out_offset_[t] = at;
      if (selected(t)) at += static_cast<std::size_t>(npart_[t]);
    }
    for (int t = 0; t < types; ++t) {
      if (!selected(t) || mass_[t] == 0.0) continue;
      for (std::int64_t i = 0; i < npart_[t]; ++i) points[out_offset_[t] + static_cast<std::size_t>(i)].m = static_cast<float>(mass_[t]);
    }

    bool have_pos = false;
    bool have_mass = mass_particles_ == 0;
    for (int block = 1; !have_pos || !have_mass; ++block) {
      std::string label;
      const std::optional<std::uint32_t> size = next_block(label, have_pos ? "MASS" : "POS");
      if (!size) {
        throw input_error(file_, std::string("no ") + (have_pos ? "MASS" : "POS") + " block: the file ends at byte " +
                                     std::to_string(in_.offset()) + " after " + std::to_string(block - 1) + " blocks");
      }
      // Format 1 has no labels: POS, VEL, ID, MASS by position.
      if (!format2_) label = block == 1 ? "POS " : block == 4 ? "MASS" : "skip";
      if (label == "POS " && !have_pos) {
        read_positions(*size, points);
        have_pos = true;
      } else if (label == "MASS" && !have_mass) {
        read_masses(*size, points);
        have_mass = true;
      } else if (!in_.skip(*size)) {
        throw truncated("the " + printable(label.data()) + " block");
      }
      end_block(*size, label);
    }
    for (int t = 0; t < types; ++t) {
      if (!selected(t)) continue;
      for (std::int64_t i = 0; i < npart_[t]; ++i) {
        const point& p = points[out_offset_[t] + static_cast<std::size_t>(i)];
        if (std::string problem = detail::point_problem(p); !problem.empty()) {
          throw input_error(file_, "type " + std::to_string(t) + " particle " + std::to_string(i) + ": " + problem);
        }
      }
    }
    return points;
  }

 private:
  input_error truncated(const std::string& where) const {
    return input_error(file_, "truncated: the file ends inside " + where + " (" + std::to_string(in_.size()) + " bytes)");
  }

  bool selected(int t) const { return type_ < 0 || type_ == t; }

  std::uint32_t read_u32(const std::string& where) {
    unsigned char b[4];
    if (!in_.read(b, 4)) throw truncated(where);
    return detail::load<std::uint32_t>(b, big_);
  }

  // Starts the next data record (format 2: after its label record) and returns its payload size,
  // or nothing at the end of the file. `label` is the format-2 label.
  std::optional<std::uint32_t> next_block(std::string& label, const char* wanted) {
    std::uint32_t marker = 0;
    if (pending_marker_) {
      marker = *pending_marker_;
      pending_marker_.reset();
    } else {
      if (in_.remaining() == 0) return std::nullopt;
      marker = read_u32(std::string("the record marker before ") + wanted);
    }
    if (format2_) {
      if (marker != label_bytes) {
        throw input_error(file_, "format 2 label record at byte " + std::to_string(in_.offset() - 4) + " has size " +
                                     std::to_string(marker) + ", expected 8");
      }
      char b[label_bytes];
      if (!in_.read(b, label_bytes)) throw truncated("a block label record");
      label.assign(b, 4);
      if (read_u32("a block label record") != label_bytes) {
        throw input_error(file_, "block label record '" + printable(b) + "': the record markers disagree");
      }
      // b[4..8] holds the next record's size + 8 as Gadget-2 writes it; the record's own markers are
      // what we check, so the copy is not needed.
      marker = read_u32("the record marker of block '" + printable(b) + "'");
    }
    if (marker > in_.remaining()) {
      throw input_error(file_, "truncated: a record of " + std::to_string(marker) + " bytes starts at byte " +
                                   std::to_string(in_.offset()) + " but only " + std::to_string(in_.remaining()) +
                                   " bytes follow");
    }
    return marker;
  }

  void end_block(std::uint32_t size, const std::string& label) {
    const std::string where = format2_ ? "block '" + printable(label.data()) + "'" : "record at byte " + std::to_string(in_.offset());
    const std::uint32_t trailing = read_u32("the trailing marker of the " + where);
    if (trailing != size) {
      throw input_error(file_, "record markers disagree in the " + where + ": " + std::to_string(size) + " before, " +
                                   std::to_string(trailing) + " after");
    }
  }

  void read_header() {
    std::string label;
    const std::optional<std::uint32_t> size = next_block(label, "HEAD");
    if (!size) throw truncated("the header");
    if (format2_ && label != "HEAD") throw input_error(file_, "the first block is '" + printable(label.data()) + "', expected 'HEAD'");
    if (*size != header_bytes) {
      throw input_error(file_, "header record holds " + std::to_string(*size) + " bytes, expected 256");
    }
    unsigned char h[header_bytes];
    if (!in_.read(h, header_bytes)) throw truncated("the header");
    end_block(header_bytes, "HEAD");
    for (int t = 0; t < types; ++t) {
      npart_[t] = detail::load<std::int32_t>(h + 4 * t, big_);
      mass_[t] = detail::load<double>(h + 24 + 8 * t, big_);
      if (npart_[t] < 0) throw input_error(file_, "header: npart[" + std::to_string(t) + "] = " + std::to_string(npart_[t]) + " is negative");
      if (!std::isfinite(mass_[t]) || mass_[t] < 0.0) {
        char value[32];
        std::snprintf(value, sizeof value, "%.17g", mass_[t]);
        throw input_error(file_, "header: mass[" + std::to_string(t) + "] = " + value + " is not a finite non-negative mass");
      }
      if (std::string problem = detail::narrowing_problem(mass_[t], 3); !problem.empty())
        throw input_error(file_, "header: mass[" + std::to_string(t) + "]: " + problem);
      total_ += npart_[t];
      if (selected(t)) selected_ += static_cast<std::size_t>(npart_[t]);
      if (mass_[t] == 0.0) mass_particles_ += npart_[t];
    }
    if (const std::int32_t files = detail::load<std::int32_t>(h + 124, big_); files > 1) {
      throw input_error(file_, "header: num_files = " + std::to_string(files) +
                                   ": one file of a multi-file snapshot holds only part of it; not supported");
    }
    // The POS block is one record with a 32-bit length: it cannot hold more particles than this.
    if (static_cast<std::uint64_t>(total_) * 12 > std::numeric_limits<std::uint32_t>::max()) {
      throw input_error(file_, "header: " + std::to_string(total_) +
                                   " particles do not fit one POS record (32-bit record lengths hold at most " +
                                   std::to_string(std::numeric_limits<std::uint32_t>::max() / 12) + ")");
    }
    // Fail before allocating: every particle needs at least 12 bytes of POS.
    if (static_cast<std::uint64_t>(total_) * 12 > in_.remaining()) {
      throw input_error(file_, "truncated data: the header promises " + std::to_string(total_) + " particles (" +
                                   std::to_string(total_ * 12) + " bytes of float32 positions) but only " +
                                   std::to_string(in_.remaining()) + " bytes follow the header");
    }
  }

  // Calls fn(particle type, index within type, value) for every value of a block holding
  // `per_particle` values (of `bytes` each) for each particle of the types `in_block` accepts.
  template <class InBlock, class Fn>
  void for_each_value(std::size_t bytes, int per_particle, InBlock in_block, Fn fn, const char* what) {
    std::vector<unsigned char> chunk;
    for (int t = 0; t < types; ++t) {
      if (!in_block(t)) continue;
      const std::uint64_t values = static_cast<std::uint64_t>(npart_[t]) * static_cast<std::uint64_t>(per_particle);
      if (!selected(t)) {
        if (!in_.skip(values * bytes)) throw truncated(std::string("the ") + what + " block");
        continue;
      }
      for (std::uint64_t done = 0; done < values;) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(values - done, chunk_values));
        chunk.resize(n * bytes);
        if (!in_.read(chunk.data(), chunk.size())) throw truncated(std::string("the ") + what + " block");
        for (std::size_t k = 0; k < n; ++k) {
          const unsigned char* v = chunk.data() + k * bytes;
          const double value = bytes == 4 ? detail::load<float>(v, big_) : detail::load<double>(v, big_);
          const std::uint64_t index = done + k;
          fn(t, static_cast<std::size_t>(index / static_cast<std::uint64_t>(per_particle)),
             static_cast<int>(index % static_cast<std::uint64_t>(per_particle)), value);
        }
        done += n;
      }
    }
  }

  void read_positions(std::uint32_t size, std::vector<point>& points) {
    const std::uint64_t n = static_cast<std::uint64_t>(total_);
    const std::size_t bytes = size == 12 * n ? 4 : size == 24 * n ? 8 : 0;
    if (bytes == 0) {
      throw input_error(file_, "POS block holds " + std::to_string(size) + " bytes, expected 12 * " + std::to_string(n) +
                                   " (float32) or 24 * " + std::to_string(n) + " (float64)");
    }
    for_each_value(bytes, 3, [](int) { return true; },
                   [&](int t, std::size_t i, int axis, double v) {
                     if (std::string problem = detail::narrowing_problem(v, axis); !problem.empty())
                       throw input_error(file_, "type " + std::to_string(t) + " particle " + std::to_string(i) + ": " + problem);
                     point& p = points[out_offset_[t] + i];
                     (axis == 0 ? p.x : axis == 1 ? p.y : p.z) = static_cast<float>(v);
                   },
                   "POS");
  }

  void read_masses(std::uint32_t size, std::vector<point>& points) {
    const std::uint64_t n = static_cast<std::uint64_t>(mass_particles_);
    const std::size_t bytes = size == 4 * n ? 4 : size == 8 * n ? 8 : 0;
    if (bytes == 0) {
      throw input_error(file_, "MASS block holds " + std::to_string(size) + " bytes, expected 4 * " + std::to_string(n) +
                                   " (float32) or 8 * " + std::to_string(n) +
                                   " (float64): one mass per particle of the types whose header mass is 0");
    }
    for_each_value(bytes, 1, [&](int t) { return mass_[t] == 0.0 && npart_[t] > 0; },
                   [&](int t, std::size_t i, int, double v) {
                     if (std::string problem = detail::narrowing_problem(v, 3); !problem.empty())
                       throw input_error(file_, "type " + std::to_string(t) + " particle " + std::to_string(i) + ": " + problem);
                     points[out_offset_[t] + i].m = static_cast<float>(v);
                   },
                   "MASS");
  }

  detail::byte_stream& in_;
  const std::string& file_;
  int type_;
  bool big_ = false;
  bool format2_ = false;
  std::optional<std::uint32_t> pending_marker_;
  std::array<std::int64_t, types> npart_{};
  std::array<double, types> mass_{};
  std::array<std::size_t, types> out_offset_{};
  std::int64_t total_ = 0;
  std::int64_t mass_particles_ = 0;
  std::size_t selected_ = 0;
};

void check_type(int type, std::string_view source) {
  if (type < -1 || type >= types) {
    throw input_error(std::string(source), "Gadget particle type " + std::to_string(type) + " does not exist (0..5, or -1 for all)");
  }
}

}  // namespace

std::vector<point> read_points_gadget(const std::filesystem::path& path, int type) {
  check_type(type, path.string());
  detail::byte_stream in = detail::file_stream(path);
  return gadget_reader(in, type).read();
}

std::vector<point> parse_points_gadget(std::span<const std::byte> bytes, int type, std::string_view source) {
  check_type(type, source);
  detail::byte_stream in(bytes, std::string(source));
  return gadget_reader(in, type).read();
}

}  // namespace canopy::trees
