// SPDX-License-Identifier: Apache-2.0
// The readers of other programs' point files (point_formats.hpp) and content detection
// (detect_point_format, read_points with read_options), over files made byte by byte here.
#include <canopy/trees/point_formats.hpp>
#include <canopy/trees/point_io.hpp>

#include "point_file_images.hpp"
#include "test_support.hpp"

#include <cmath>
#include <fstream>
#include <limits>
#include <span>

namespace canopy::trees {
namespace {

using testing::expect_throw;
using testing::gadget_contents;
using testing::gadget_image;
using testing::gadget_layout;
using testing::npy_image;
using testing::same_bits;
using testing::temp_dir;
using testing::tipsy_contents;
using testing::tipsy_image;

constexpr float nan_f = std::numeric_limits<float>::quiet_NaN();

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Prints points on failure, compares bit for bit.
void expect_points(const std::vector<point>& got, const std::vector<point>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(same_bits(got[i], want[i])) << "point " << i << ": got (" << got[i].x << ", " << got[i].y << ", "
                                            << got[i].z << ", " << got[i].m << ") want (" << want[i].x << ", "
                                            << want[i].y << ", " << want[i].z << ", " << want[i].m << ")";
  }
}

std::vector<point> concat(std::initializer_list<std::vector<point>> parts) {
  std::vector<point> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

// Every proper prefix of `image` (cut at the offsets `keep` accepts) must be rejected.
template <class Parse, class Keep>
void expect_every_prefix_rejected(const std::string& image, Parse parse, Keep keep) {
  for (std::size_t n = 0; n < image.size(); ++n) {
    if (!keep(n)) continue;
    try {
      const auto pts = parse(as_bytes(image.substr(0, n)));
      ADD_FAILURE() << "a prefix of " << n << " of " << image.size() << " bytes was accepted (" << pts.size() << " points)";
    } catch (const input_error& e) {
      EXPECT_EQ(e.source(), "cut");
      EXPECT_FALSE(e.problem().empty());
    }
  }
}

const auto all_prefixes = [](std::size_t) { return true; };

// ------------------------------------------------------------------ Tipsy ----------------------

tipsy_contents sample_tipsy() {
  return {{{1.0f, 2.0f, 3.0f, 0.5f}, {-1.0f, -2.0f, -3.0f, 0.25f}},
          {{0.1f, 0.2f, 0.3f, 2.0f}, {4.0f, 5.0f, 6.0f, 3.0f}, {7.0f, 8.0f, 9.0f, 0.0f}},
          {{-7.5f, 1e-3f, 1e6f, 0.125f}}};
}

TEST(PointFormatsTipsy, ReadsBothByteOrdersAndHeaderForms) {
  const auto c = sample_tipsy();
  const auto want = concat({c.gas, c.dark, c.star});
  for (const bool big : {true, false}) {
    for (const bool padded : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "big " << big << " padded " << padded);
      const std::string image = tipsy_image(c, big, padded);
      EXPECT_EQ(image.size(), (padded ? 32u : 28u) + 2 * 48 + 3 * 36 + 44);
      EXPECT_EQ(detect_point_format(as_bytes(image)), point_format::tipsy);
      expect_points(parse_points_tipsy(as_bytes(image)), want);
      expect_points(parse_points(as_bytes(image)), want);
    }
  }
}

TEST(PointFormatsTipsy, FamilySelection) {
  const auto c = sample_tipsy();
  const std::string image = tipsy_image(c, true);
  expect_points(parse_points_tipsy(as_bytes(image), tipsy_family::gas), c.gas);
  expect_points(parse_points_tipsy(as_bytes(image), tipsy_family::dark), c.dark);
  expect_points(parse_points_tipsy(as_bytes(image), tipsy_family::star), c.star);
  read_options o;
  o.family = tipsy_family::dark;
  expect_points(parse_points(as_bytes(image), o), c.dark);
  EXPECT_EQ(parse_tipsy_family("star"), tipsy_family::star);
  expect_throw<input_error>([] { parse_tipsy_family("stars"); }, {"'stars'", "gas, dark, star or all"});
}

TEST(PointFormatsTipsy, EmptyFamilies) {
  const tipsy_contents c{{}, {{1.0f, 1.0f, 1.0f, 1.0f}}, {}};
  EXPECT_TRUE(parse_points_tipsy(as_bytes(tipsy_image(c, false)), tipsy_family::gas).empty());
  EXPECT_TRUE(parse_points_tipsy(as_bytes(tipsy_image({}, true))).empty());
}

TEST(PointFormatsTipsy, RejectsEveryTruncation) {
  const std::string image = tipsy_image(sample_tipsy(), true);
  // A padded file without its last 4 bytes has exactly the size of an unpadded one: the one
  // ambiguity of the format (documented), so that cut is read as the 28-byte form.
  expect_every_prefix_rejected(image, [](auto b) { return parse_points_tipsy(b, tipsy_family::all, "cut"); },
                               [&](std::size_t n) { return n != image.size() - 4; });
  expect_throw<input_error>([&] { parse_points_tipsy(as_bytes(image.substr(0, 20)), tipsy_family::all, "t"); },
                            {"t: truncated Tipsy header", "20 bytes"});
  expect_throw<input_error>([&] { parse_points_tipsy(as_bytes(image.substr(0, 100)), tipsy_family::all, "t"); },
                            {"truncated data", "2 gas, 3 dark and 1 star", "100 bytes"});
}

TEST(PointFormatsTipsy, RejectsBadHeaders) {
  const auto c = sample_tipsy();
  expect_throw<input_error>([&] { parse_points_tipsy(as_bytes(tipsy_image(c, true, true, 1)), tipsy_family::all, "t"); },
                            {"t: header counts disagree", "nbodies = 7", "= 6"});
  expect_throw<input_error>([&] { parse_points_tipsy(as_bytes(tipsy_image(c, true, true, 0, 2))); }, {"ndim", "expected 3"});
  expect_throw<input_error>([&] { parse_points_tipsy(as_bytes(tipsy_image(c, false) + "xyzw1234")); },
                            {"count disagrees with file size"});
  std::string negative = tipsy_image({}, false);
  const std::int32_t minus = -1, nbodies = -1;
  std::memcpy(negative.data() + 20, &minus, 4);
  std::memcpy(negative.data() + 8, &nbodies, 4);
  expect_throw<input_error>([&] { parse_points_tipsy(as_bytes(negative)); }, {"negative particle count ndark"});
}

TEST(PointFormatsTipsy, RejectsInvalidValues) {
  auto c = sample_tipsy();
  c.dark[1].y = nan_f;
  expect_throw<input_error>([&] { parse_points_tipsy(as_bytes(tipsy_image(c, true)), tipsy_family::all, "t"); },
                            {"t: dark particle 1", "non-finite coordinate y"});
  // The bad particle is not read when its family is not chosen.
  EXPECT_EQ(parse_points_tipsy(as_bytes(tipsy_image(c, true)), tipsy_family::gas).size(), 2u);
  c = sample_tipsy();
  c.star[0].m = -1.0f;
  expect_throw<input_error>([&] { parse_points_tipsy(as_bytes(tipsy_image(c, false))); }, {"star particle 0", "negative mass"});
}

// ------------------------------------------------------------------ Gadget ---------------------

gadget_contents sample_gadget() {
  gadget_contents c;
  c.particles[0] = {{1.0f, 2.0f, 3.0f, 0.5f}, {4.0f, 5.0f, 6.0f, 0.75f}};            // masses in MASS
  c.particles[1] = {{-1.0f, 0.0f, 1.0f, 0.0f}, {2.0f, 2.0f, 2.0f, 0.0f}, {9.0f, 8.0f, 7.0f, 0.0f}};  // table mass
  c.particles[4] = {{0.25f, 0.5f, 0.125f, 3.0f}};                                      // masses in MASS
  c.mass_table = {0.0, 1.5, 0.0, 0.0, 0.0, 0.0};
  return c;
}

std::vector<point> expected_gadget(const gadget_contents& c, int type = -1) {
  std::vector<point> want;
  for (int t = 0; t < 6; ++t) {
    if (type >= 0 && t != type) continue;
    for (point p : c.particles[t]) {
      if (c.mass_table[t] != 0.0) p.m = static_cast<float>(c.mass_table[t]);
      want.push_back(p);
    }
  }
  return want;
}

TEST(PointFormatsGadget, ReadsFormats1And2InBothByteOrders) {
  const auto c = sample_gadget();
  for (const bool big : {false, true}) {
    for (const bool format2 : {false, true}) {
      for (const bool f64 : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "big " << big << " format2 " << format2 << " f64 " << f64);
        const std::string image = gadget_image(c, {big, format2, f64, format2});
        EXPECT_EQ(detect_point_format(as_bytes(image)), point_format::gadget);
        expect_points(parse_points_gadget(as_bytes(image)), expected_gadget(c));
        expect_points(parse_points(as_bytes(image)), expected_gadget(c));
      }
    }
  }
}

TEST(PointFormatsGadget, TypeSelection) {
  const auto c = sample_gadget();
  for (const bool format2 : {false, true}) {
    const std::string image = gadget_image(c, {true, format2});
    for (int t = 0; t < 6; ++t) expect_points(parse_points_gadget(as_bytes(image), t), expected_gadget(c, t));
    read_options o;
    o.gadget_type = 4;
    expect_points(parse_points(as_bytes(image), o), expected_gadget(c, 4));
  }
  expect_throw<input_error>([] { parse_points_gadget({}, 6, "g"); }, {"g: Gadget particle type 6 does not exist"});
}

TEST(PointFormatsGadget, AllMassesFromTheTable) {
  auto c = sample_gadget();
  c.mass_table = {0.5, 1.5, 0.0, 0.0, 2.0, 0.0};  // no MASS block at all
  for (const bool format2 : {false, true}) {
    const std::string image = gadget_image(c, {false, format2});
    EXPECT_EQ(image.find("MASS"), std::string::npos);
    expect_points(parse_points_gadget(as_bytes(image)), expected_gadget(c));
  }
}

TEST(PointFormatsGadget, RejectsEveryTruncation) {
  const auto c = sample_gadget();  // needs its MASS block, the last one: every cut loses something
  for (const bool big : {false, true}) {
    for (const bool format2 : {false, true}) {
      expect_every_prefix_rejected(gadget_image(c, {big, format2}), [](auto b) { return parse_points_gadget(b, -1, "cut"); },
                                   all_prefixes);
    }
  }
  const std::string image = gadget_image(c, {false, false});
  expect_throw<input_error>([&] { parse_points_gadget(as_bytes(image.substr(0, 100)), -1, "g"); }, {"g: truncated", "256 bytes"});
  // Cut just after POS, VEL and ID: the MASS block is missing.
  const std::size_t after_id = 4 + 256 + 4 + 2 * (8 + 6 * 12) + (8 + 6 * 4);
  expect_throw<input_error>([&] { parse_points_gadget(as_bytes(image.substr(0, after_id)), -1, "g"); }, {"no MASS block"});
}

TEST(PointFormatsGadget, RejectsBadHeadersAndBlocks) {
  auto c = sample_gadget();
  c.num_files = 2;
  expect_throw<input_error>([&] { parse_points_gadget(as_bytes(gadget_image(c, {})), -1, "g"); }, {"g: header: num_files = 2"});
  c = sample_gadget();
  c.mass_table[1] = -1.0;
  expect_throw<input_error>([&] { parse_points_gadget(as_bytes(gadget_image(c, {}))); }, {"mass[1]", "not a finite non-negative"});

  const std::string good = gadget_image(sample_gadget(), {});
  std::string bad = good;
  bad[4] = 3;  // npart[0] = 3, one more than POS holds
  expect_throw<input_error>([&] { parse_points_gadget(as_bytes(bad)); }, {"POS block holds 72 bytes", "12 * 7"});
  bad = good;
  const std::int32_t negative = -3;
  std::memcpy(bad.data() + 4 + 4, &negative, 4);
  expect_throw<input_error>([&] { parse_points_gadget(as_bytes(bad)); }, {"npart[1] = -3 is negative"});
  bad = good;
  bad[4 + 256] = 1;  // the header's trailing marker
  expect_throw<input_error>([&] { parse_points_gadget(as_bytes(bad)); }, {"record markers disagree"});
  bad = good;
  bad[0] = 7;
  expect_throw<input_error>([&] { parse_points_gadget(as_bytes(bad)); }, {"not a Gadget snapshot", "first record marker is 263"});
  // A huge count fails from the header, before anything is allocated: no POS record (32-bit
  // record lengths) can hold that many particles. (Two such counts once overflowed an int
  // offset into the output, and a large enough sparse file was written out of bounds.)
  bad = good;
  const std::int32_t huge = std::numeric_limits<std::int32_t>::max();
  std::memcpy(bad.data() + 4 + 12, &huge, 4);
  expect_throw<input_error>([&] { parse_points_gadget(as_bytes(bad)); }, {"2147483653 particles", "do not fit one POS record"});
  // Format 2: the first label must be HEAD.
  std::string f2 = gadget_image(sample_gadget(), {false, true});
  f2.replace(4, 4, "POS ");
  expect_throw<input_error>([&] { parse_points_gadget(as_bytes(f2)); }, {"first block is 'POS '"});
}

TEST(PointFormatsGadget, RejectsInvalidValues) {
  auto c = sample_gadget();
  c.particles[4][0].z = nan_f;
  expect_throw<input_error>([&] { parse_points_gadget(as_bytes(gadget_image(c, {true, true})), -1, "g"); },
                            {"g: type 4 particle 0", "non-finite coordinate z"});
  c = sample_gadget();
  c.particles[0][1].m = -2.0f;
  expect_throw<input_error>([&] { parse_points_gadget(as_bytes(gadget_image(c, {}))); }, {"type 0 particle 1", "negative mass"});
  EXPECT_EQ(parse_points_gadget(as_bytes(gadget_image(c, {})), 1).size(), 3u);  // type 0 not chosen
}

// ------------------------------------------------------------------ PLY ------------------------

const std::string ply_ascii =
    "ply\r\n"
    "format ascii 1.0\r\n"
    "comment made by hand\r\n"
    "obj_info not used\r\n"
    "element vertex 3\r\n"
    "property float x\r\n"
    "property uchar red\r\n"
    "property float y\r\n"
    "property list uchar int vertex_indices_in_a_vertex\r\n"
    "property double z\r\n"
    "property float mass\r\n"
    "element face 2\r\n"
    "property list uchar int vertex_indices\r\n"
    "end_header\r\n"
    "1 255 2 0 3 0.5\r\n"
    "-1.5 0 2.5 2 7 8 1e3 2\n"
    "  0.25 7 -0.125 1 9 0 0\n"
    "3 0 1 2\n"
    "4 0 1 2 0\n";

const std::vector<point> ply_ascii_points = {{1.0f, 2.0f, 3.0f, 0.5f}, {-1.5f, 2.5f, 1e3f, 2.0f}, {0.25f, -0.125f, 0.0f, 0.0f}};

// A binary PLY: an element before the vertices, double x, y, z, an int property, a float weight,
// and faces with lists.
std::string ply_binary(bool big, const std::vector<point>& pts, bool weight = true, int faces = 2) {
  testing::byte_writer w{big, {}};
  w.raw(std::string("ply\nformat ") + (big ? "binary_big_endian" : "binary_little_endian") +
        " 1.0\nelement camera 1\nproperty short view\nelement vertex " + std::to_string(pts.size()) +
        "\nproperty double x\nproperty int32 label\nproperty float64 y\nproperty double z\n" +
        (weight ? "property float weight\n" : "") + "element face " + std::to_string(faces) +
        "\nproperty list uchar uint vertex_index\nproperty uchar flag\nend_header\n");
  w.put(static_cast<std::int16_t>(-4));
  for (const point& p : pts) {
    w.f64(p.x).i32(-7).f64(p.y).f64(p.z);
    if (weight) w.f32(p.m);
  }
  for (int f = 0; f < faces; ++f) {
    w.put(static_cast<std::uint8_t>(3)).u32(0).u32(1).u32(2).put(static_cast<std::uint8_t>(1));
  }
  return w.s;
}

const std::vector<point> ply_points = {{1.0f, 2.0f, 3.0f, 0.5f}, {-4.0f, 0.125f, 1e-3f, 7.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};

TEST(PointFormatsPly, ReadsAsciiWithExtraPropertiesListsAndFaces) {
  EXPECT_EQ(detect_point_format(as_bytes(ply_ascii)), point_format::ply);
  expect_points(parse_points_ply(as_bytes(ply_ascii)), ply_ascii_points);
  expect_points(parse_points(as_bytes(ply_ascii)), ply_ascii_points);
}

TEST(PointFormatsPly, ReadsBinaryInBothByteOrders) {
  for (const bool big : {false, true}) {
    const std::string image = ply_binary(big, ply_points);
    EXPECT_EQ(detect_point_format(as_bytes(image)), point_format::ply);
    expect_points(parse_points_ply(as_bytes(image)), ply_points);
  }
}

TEST(PointFormatsPly, MassIsOneWithoutMassOrWeight) {
  auto want = ply_points;
  for (point& p : want) p.m = 1.0f;
  expect_points(parse_points_ply(as_bytes(ply_binary(true, ply_points, false))), want);
  const std::string text = "ply\nformat ascii 1.0\nelement vertex 1\nproperty int z\nproperty int y\nproperty int x\nend_header\n1 2 3\n";
  expect_points(parse_points_ply(as_bytes(text)), {{3.0f, 2.0f, 1.0f, 1.0f}});
}

TEST(PointFormatsPly, RejectsEveryTruncation) {
  for (const bool big : {false, true}) {
    expect_every_prefix_rejected(ply_binary(big, ply_points), [](auto b) { return parse_points_ply(b, "cut"); }, all_prefixes);
  }
  // ascii: every cut too, inside a number included ("1.2345" cut to "1.23"): the reader wants the
  // line end after the file's last number.
  expect_every_prefix_rejected(ply_ascii, [](auto b) { return parse_points_ply(b, "cut"); }, all_prefixes);
  expect_throw<input_error>([] { parse_points_ply(as_bytes(ply_ascii.substr(0, 60)), "p"); },
                            {"p: truncated header", "before end_header"});
  const std::string binary = ply_binary(false, ply_points);
  expect_throw<input_error>([&] { parse_points_ply(as_bytes(binary.substr(0, binary.size() - 10)), "p"); },
                            {"p: truncated data", "face"});
}

TEST(PointFormatsPly, RejectsBadHeadersAndData) {
  const auto reject = [](const std::string& text, std::initializer_list<std::string> words) {
    expect_throw<input_error>([&] { parse_points_ply(as_bytes(text), "p"); }, words);
  };
  const std::string head = "ply\nformat ascii 1.0\nelement vertex 1\n";
  reject(head + "property float x\nproperty float y\nend_header\n1 2\n", {"p: the vertex element has no 'z'"});
  reject(head + "property float x\nproperty float y\nproperty half z\nend_header\n1 2 3\n", {"unknown property type 'half'"});
  reject("ply\nformat ascii 2.0\nend_header\n", {"format ENCODING 1.0"});
  reject("ply\nformat binary_middle_endian 1.0\nend_header\n", {"unknown encoding"});
  reject("ply\nformat ascii 1.0\nelement face 0\nproperty list uchar int i\nend_header\n", {"no vertex element"});
  reject(head + "property float x\nproperty float y\nproperty float z\nend_header\n1 2 nan\n", {"vertex 0", "non-finite coordinate z"});
  reject(head + "property float x\nproperty float y\nproperty float z\nproperty float mass\nend_header\n1 2 3 -1\n",
         {"vertex 0", "negative mass"});
  reject(head + "property float x\nproperty float y\nproperty float z\nend_header\n1 2 3\n4\n", {"data after the last element"});
  reject(head + "property float x\nproperty float y\nproperty float z\nend_header\n1 2 3 4\n", {"p: line 8: more values than the 3 of vertex 0"});
  reject(head + "property float x\nproperty float y\nproperty float z\nend_header\n1 two 3\n", {"'two' is not a number"});
  reject(head + "property float x\nproperty float y\nproperty int z\nend_header\n1 2 3.5\n", {"'3.5' is not an integer"});
  reject("ply\nformat ascii 1.0\nelement vertex 1000000000000\nproperty float x\nproperty float y\nproperty float z\nend_header\n1 2 3\n",
         {"truncated data", "1000000000000 vertices"});
  reject("ply\nformat ascii 1.0\nproperty float x\nend_header\n", {"property before any element"});
  reject("plyx\n", {"not a PLY file"});
  reject(ply_binary(false, ply_points) + "!", {"1 bytes after the last element"});
}

// ASCII data is one element instance per line, as the format (and plyfile) has it: a vertex whose
// values run on into the next line, a line with too few or too many values, are refused naming
// the line. The reader used to take the data as one stream of numbers, lines ignored.
TEST(PointFormatsPly, AsciiIsOneElementPerLine) {
  const auto reject = [](const std::string& text, std::initializer_list<std::string> words) {
    expect_throw<input_error>([&] { parse_points_ply(as_bytes(text), "p"); }, words);
  };
  // Seven header lines: the data starts on line 8.
  const std::string head = "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\nproperty float z\nend_header\n";
  reject(head + "1 2\n3 4 5 6\n", {"p: line 8: vertex 0 ends after 2 values, before property 'z' (one vertex per line)"});
  reject(head + "1 2 3 4\n5 6\n", {"p: line 8: more values than the 3 of vertex 0"});
  reject(head + "1 2 3\n4 5\n6\n", {"p: line 9: vertex 1 ends after 2 values"});
  reject(head + "1 2 3\n\n4 5\n6\n", {"p: line 10: vertex 1 ends after 2 values"});
  // Spaces and a '\r' at a line's end, and empty lines between instances, are fine.
  expect_points(parse_points_ply(as_bytes(head + "1 2 3 \r\n\n  4 5 6\n")), {{1, 2, 3, 1}, {4, 5, 6, 1}});
  // A list's count says how many values follow on its line.
  const std::string faces = "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\nproperty float z\n"
                            "element face 1\nproperty list uchar int i\nend_header\n1 2 3\n";
  expect_points(parse_points_ply(as_bytes(faces + "3 0 1 2\n")), {{1, 2, 3, 1}});
  reject(faces + "3 0 1\n2\n", {"p: line 11: face 0 ends after 3 values, before property 'i'"});
  reject(faces + "3 0 1 2 5\n", {"p: line 11: more values than the 4 of face 0"});
}

// ------------------------------------------------------------------ NumPy ----------------------

const std::vector<double> npy_values4 = {1.0, 2.0, 3.0, 0.5, -1.0, -2.5, 1e3, 2.0, 0.125, 0.0, -0.0, 0.0};

std::vector<point> npy_points(std::size_t cols) {
  std::vector<point> pts;
  const std::vector<double>& v = npy_values4;
  for (std::size_t r = 0; r < 3; ++r) {
    pts.push_back({static_cast<float>(v[r * 4]), static_cast<float>(v[r * 4 + 1]), static_cast<float>(v[r * 4 + 2]),
                   cols == 4 ? static_cast<float>(v[r * 4 + 3]) : 1.0f});
  }
  return pts;
}

std::vector<double> columns(std::size_t cols) {
  std::vector<double> v;
  for (std::size_t r = 0; r < 3; ++r) v.insert(v.end(), npy_values4.begin() + static_cast<long>(r * 4), npy_values4.begin() + static_cast<long>(r * 4 + cols));
  return v;
}

TEST(PointFormatsNpy, ReadsEveryVersionDtypeShapeAndOrder) {
  for (const int major : {1, 2, 3}) {
    for (const char* descr : {"<f4", ">f4", "<f8", ">f8"}) {
      for (const bool fortran : {false, true}) {
        for (const std::size_t cols : {3u, 4u}) {
          SCOPED_TRACE(::testing::Message() << "v" << major << " " << descr << " fortran " << fortran << " cols " << cols);
          const std::string image = npy_image(major, descr, fortran, 3, cols, columns(cols));
          EXPECT_EQ(detect_point_format(as_bytes(image)), point_format::npy);
          expect_points(parse_points_npy(as_bytes(image)), npy_points(cols));
          expect_points(parse_points(as_bytes(image)), npy_points(cols));
        }
      }
    }
  }
}

TEST(PointFormatsNpy, FortranOrderIsColumnMajor) {
  // 2 x 3 in Fortran order: the bytes are x0 x1 y0 y1 z0 z1.
  const std::string image = npy_image(1, "<f4", true, 2, 3, {1, 2, 3, 4, 5, 6});
  const std::size_t data = image.size() - 24;
  float stored[6];
  std::memcpy(stored, image.data() + data, sizeof stored);
  EXPECT_EQ(stored[1], 4.0f);
  expect_points(parse_points_npy(as_bytes(image)), {{1, 2, 3, 1}, {4, 5, 6, 1}});
}

TEST(PointFormatsNpy, RejectsEveryTruncation) {
  for (const int major : {1, 2}) {
    expect_every_prefix_rejected(npy_image(major, "<f8", true, 3, 4, columns(4)), [](auto b) { return parse_points_npy(b, "cut"); },
                                 all_prefixes);
  }
  const std::string image = npy_image(1, "<f4", false, 3, 3, columns(3));
  expect_throw<input_error>([&] { parse_points_npy(as_bytes(image.substr(0, image.size() - 1)), "n"); },
                            {"n: truncated data", "3 rows of 12 bytes", "35 bytes"});
}

TEST(PointFormatsNpy, RejectsBadHeadersAndData) {
  const auto reject = [](const std::string& image, std::initializer_list<std::string> words) {
    expect_throw<input_error>([&] { parse_points_npy(as_bytes(image), "n"); }, words);
  };
  reject(npy_image(1, "<f4", false, 3, 3, columns(3)) + "abcd", {"n: shape disagrees with file size", "36 bytes", "40 bytes"});
  reject(npy_image(1, "<i4", false, 3, 3, columns(3)), {"dtype '<i4' is not supported"});
  reject(npy_image(1, "<f8", false, 3, 3, columns(3), "(9,)"), {"shape (9,) is not (N, 3)"});
  reject(npy_image(1, "<f8", false, 3, 3, columns(3), "(3, 5)"), {"shape (3, 5)"});
  reject(npy_image(1, "<f8", false, 3, 3, columns(3), "(3, 3), 'extra': 1"), {"unexpected key 'extra'"});
  std::string v4 = npy_image(1, "<f4", false, 3, 3, columns(3));
  v4[6] = 4;
  reject(v4, {"unsupported npy format version 4.0"});
  std::string no_order = npy_image(1, "<f4", false, 3, 3, columns(3));
  no_order.replace(no_order.find("'fortran_order': False, "), 24, std::string(24, ' '));
  reject(no_order, {"must have 'descr', 'fortran_order' and 'shape'"});
  auto v = columns(4);
  v[6] = std::numeric_limits<double>::infinity();
  reject(npy_image(2, ">f8", true, 3, 4, v), {"row 1", "non-finite coordinate z"});
  v = columns(4);
  v[11] = -0.5;
  reject(npy_image(3, "<f4", false, 3, 4, v), {"row 2", "negative mass"});
  v = columns(4);
  v[4] = 1e300;  // finite double, no float: out of float32 range
  reject(npy_image(1, "<f8", false, 3, 4, v), {"row 1", "coordinate x = 1.0000000000000001e+300 is beyond float32's range"});
}

// ------------------------------------------------------------------ detection and files ---------

TEST(PointFormatsDetect, ContentWinsOverTheName) {
  temp_dir dir;
  const std::string tipsy = tipsy_image(sample_tipsy(), true);
  write_bytes(dir / "snap.ply", tipsy);  // named like a PLY file, is Tipsy
  EXPECT_EQ(detect_point_format(dir / "snap.ply"), point_format::tipsy);
  expect_points(read_points(dir / "snap.ply"), concat({sample_tipsy().gas, sample_tipsy().dark, sample_tipsy().star}));
  write_bytes(dir / "cloud.csv", ply_ascii);
  EXPECT_EQ(detect_point_format(dir / "cloud.csv"), point_format::ply);
  expect_points(read_points(dir / "cloud.csv"), ply_ascii_points);
  write_bytes(dir / "points", "x,y,z,m\n1,2,3,4\n");
  EXPECT_EQ(detect_point_format(dir / "points"), point_format::csv);
  expect_points(read_points(dir / "points"), {{1, 2, 3, 4}});
  write_bytes(dir / "snapshot_000", gadget_image(sample_gadget(), {true, true}));
  expect_points(read_points(dir / "snapshot_000"), expected_gadget(sample_gadget()));
  write_bytes(dir / "a.dat", npy_image(1, "<f4", false, 3, 3, columns(3)));
  expect_points(read_points(dir / "a.dat"), npy_points(3));
}

TEST(PointFormatsDetect, NameDecidesOnlyForUnrecognisedContent) {
  EXPECT_EQ(detect_point_format(as_bytes("garbage"), "a.npy"), point_format::npy);
  EXPECT_EQ(detect_point_format(as_bytes("garbage"), "a.PLY"), point_format::ply);
  EXPECT_EQ(detect_point_format(as_bytes("garbage"), "a.std"), point_format::tipsy);
  EXPECT_EQ(detect_point_format(as_bytes("garbage"), "a.gadget"), point_format::gadget);
  EXPECT_EQ(detect_point_format(as_bytes("garbage"), "a.csv"), point_format::csv);
  EXPECT_EQ(detect_point_format(as_bytes("garbage"), "a.pts"), point_format::binary);
  EXPECT_EQ(detect_point_format(as_bytes(""), ""), point_format::binary);
  temp_dir dir;
  write_bytes(dir / "short.npy", "\x93NUM");
  expect_throw<input_error>([&] { read_points(dir / "short.npy"); }, {"short.npy", "truncated npy header"});
}

TEST(PointFormatsDetect, OptionsThatDoNotFitTheFileAreErrors) {
  temp_dir dir;
  write_bytes(dir / "c.ply", ply_ascii);
  read_options family;
  family.family = tipsy_family::gas;
  expect_throw<input_error>([&] { read_points(dir / "c.ply", family); }, {"c.ply", "Tipsy family (gas)", "ply file"});
  read_options type;
  type.gadget_type = 0;
  write_bytes(dir / "t.bin", tipsy_image(sample_tipsy(), false));
  expect_throw<input_error>([&] { read_points(dir / "t.bin", type); }, {"t.bin", "Gadget particle type (0)", "tipsy file"});
  expect_points(read_points(dir / "t.bin", family), sample_tipsy().gas);
}

// Files larger than the readers' 1 MiB buffer: reads across buffer boundaries and skips past them
// give the same points as the in-memory parse, and the right ones.
TEST(PointFormatsFiles, LargeFilesStreamLikeMemory) {
  temp_dir dir;
  std::vector<point> many;
  for (int i = 0; i < 70000; ++i) {
    many.push_back({static_cast<float>(i), static_cast<float>(-i) * 0.5f, static_cast<float>(i % 977), 1.0f + static_cast<float>(i % 3)});
  }
  tipsy_contents t{{many.begin(), many.begin() + 30000}, {many.begin() + 30000, many.begin() + 60000}, {many.begin() + 60000, many.end()}};
  write_bytes(dir / "t", tipsy_image(t, true));
  expect_points(read_points(dir / "t"), many);
  read_options star;
  star.family = tipsy_family::star;
  expect_points(read_points(dir / "t", star), t.star);

  gadget_contents g;
  g.particles[1] = {many.begin(), many.begin() + 50000};
  g.particles[2] = {many.begin() + 50000, many.end()};
  g.mass_table = {0, 0, 0, 0, 0, 0};
  write_bytes(dir / "g", gadget_image(g, {false, true, false, true}));
  expect_points(read_points(dir / "g"), many);
  read_options type2;
  type2.gadget_type = 2;
  expect_points(read_points(dir / "g", type2), g.particles[2]);

  write_bytes(dir / "c.ply", ply_binary(true, many));
  expect_points(read_points(dir / "c.ply"), many);

  std::vector<double> values;
  for (const point& p : many) values.insert(values.end(), {p.x, p.y, p.z, p.m});
  write_bytes(dir / "f.npy", npy_image(2, ">f8", true, many.size(), 4, values));
  expect_points(read_points(dir / "f.npy"), many);
}

}  // namespace
}  // namespace canopy::trees
