// SPDX-License-Identifier: Apache-2.0
// Hand-made images of other programs' point files (Tipsy, Gadget, PLY, .npy), built byte by byte
// from the format descriptions, for the reader tests. Every field is written explicitly so that a
// test can break exactly one of them.
#pragma once

#include <canopy/trees/point.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace canopy::trees::testing {

// Appends values in a chosen byte order.
struct byte_writer {
  bool big = false;
  std::string s;

  template <class T>
  byte_writer& put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    if (big != (std::endian::native == std::endian::big)) std::reverse(b, b + sizeof(T));
    s.append(b, sizeof(T));
    return *this;
  }
  byte_writer& i32(std::int32_t v) { return put(v); }
  byte_writer& u32(std::uint32_t v) { return put(v); }
  byte_writer& f32(float v) { return put(v); }
  byte_writer& f64(double v) { return put(v); }
  byte_writer& raw(const std::string& bytes) {
    s += bytes;
    return *this;
  }
};

// ------------------------------------------------------------------ Tipsy ----------------------

struct tipsy_contents {
  std::vector<point> gas, dark, star;
};

// A Tipsy file: header (28 bytes, or 32 with `padded`), then gas (12 floats), dark (9), star (11)
// records: mass, x, y, z, then distinct filler values for the other fields.
inline std::string tipsy_image(const tipsy_contents& c, bool big, bool padded = true, int nbodies_delta = 0,
                               int ndim = 3) {
  byte_writer w{big, {}};
  const auto n = [](const std::vector<point>& v) { return static_cast<std::int32_t>(v.size()); };
  w.f64(0.75).i32(n(c.gas) + n(c.dark) + n(c.star) + nbodies_delta).i32(ndim).i32(n(c.gas)).i32(n(c.dark)).i32(n(c.star));
  if (padded) w.i32(0);
  const auto records = [&](const std::vector<point>& v, int floats) {
    for (const point& p : v) {
      w.f32(p.m).f32(p.x).f32(p.y).f32(p.z);
      for (int k = 4; k < floats; ++k) w.f32(100.0f + static_cast<float>(k));
    }
  };
  records(c.gas, 12);
  records(c.dark, 9);
  records(c.star, 11);
  return w.s;
}

// ------------------------------------------------------------------ Gadget ---------------------

struct gadget_contents {
  std::array<std::vector<point>, 6> particles;  // by type; .m is used where the table mass is 0
  std::array<double, 6> mass_table{};
  std::int32_t num_files = 1;
};

struct gadget_layout {
  bool big = false;
  bool format2 = false;
  bool f64_positions = false;
  bool extra_block_before_mass = false;  // format 2: a "U   " block between ID and MASS
};

// A Gadget snapshot: HEAD, POS, VEL, ID, [U], MASS (only when some present type has table mass 0).
inline std::string gadget_image(const gadget_contents& c, const gadget_layout& l) {
  byte_writer w{l.big, {}};
  const auto block = [&](const char* label, const std::string& payload) {
    if (l.format2) {
      w.u32(8).raw(std::string(label, 4)).u32(static_cast<std::uint32_t>(payload.size() + 8)).u32(8);
    }
    w.u32(static_cast<std::uint32_t>(payload.size())).raw(payload).u32(static_cast<std::uint32_t>(payload.size()));
  };
  byte_writer h{l.big, {}};
  for (const auto& v : c.particles) h.i32(static_cast<std::int32_t>(v.size()));
  for (double m : c.mass_table) h.f64(m);
  h.f64(0.5).f64(1.0).i32(0).i32(0);                                              // time, redshift, sfr, feedback
  for (const auto& v : c.particles) h.u32(static_cast<std::uint32_t>(v.size()));  // npartTotal
  h.i32(0).i32(c.num_files).f64(10.0);                                            // cooling, num_files, BoxSize
  h.s.resize(256, '\0');
  block("HEAD", h.s);
  byte_writer pos{l.big, {}}, vel{l.big, {}}, ids{l.big, {}}, u{l.big, {}}, mass{l.big, {}};
  std::uint32_t id = 1;
  bool any_mass = false;
  for (int t = 0; t < 6; ++t) {
    for (const point& p : c.particles[t]) {
      if (l.f64_positions) pos.f64(p.x).f64(p.y).f64(p.z);
      else pos.f32(p.x).f32(p.y).f32(p.z);
      vel.f32(-1.0f).f32(-2.0f).f32(-3.0f);
      ids.u32(id++);
      if (t == 0) u.f32(42.0f);
      if (c.mass_table[t] == 0.0) {
        mass.f32(p.m);
        any_mass = true;
      }
    }
  }
  block("POS ", pos.s);
  block("VEL ", vel.s);
  block("ID  ", ids.s);
  if (l.format2 && l.extra_block_before_mass) block("U   ", u.s);
  if (any_mass) block("MASS", mass.s);
  return w.s;
}

// ------------------------------------------------------------------ NumPy ----------------------

// A .npy file of `rows` x `cols` values (row-major in `values`), written in C or Fortran order.
inline std::string npy_image(int major, const std::string& descr, bool fortran, std::size_t rows, std::size_t cols,
                             const std::vector<double>& values, const std::string& shape_override = {}) {
  // Appended piece by piece: GCC 12 reports a false -Wrestrict on a chain of operator+ here.
  std::string dict = "{'descr': '";
  dict += descr;
  dict += "', 'fortran_order': ";
  dict += fortran ? "True" : "False";
  dict += ", 'shape': ";
  if (shape_override.empty()) {
    dict += '(';
    dict += std::to_string(rows);
    dict += ", ";
    dict += std::to_string(cols);
    dict += ')';
  } else {
    dict += shape_override;
  }
  dict += ", }";
  const std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  byte_writer w{false, {}};
  w.raw(std::string("\x93NUMPY", 6)).put(static_cast<std::uint8_t>(major)).put(static_cast<std::uint8_t>(0));
  if (major == 1) w.put(static_cast<std::uint16_t>(dict.size()));
  else w.u32(static_cast<std::uint32_t>(dict.size()));
  w.raw(dict);
  w.big = descr[0] == '>';
  for (std::size_t k = 0; k < rows * cols; ++k) {
    const std::size_t r = fortran ? k % rows : k / cols;
    const std::size_t col = fortran ? k / rows : k % cols;
    const double v = values[r * cols + col];
    if (descr[2] == '4') w.f32(static_cast<float>(v));
    else w.f64(v);
  }
  return w.s;
}

}  // namespace canopy::trees::testing
