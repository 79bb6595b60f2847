// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/generators.hpp>
#include <canopy/trees/point_io.hpp>

#include "test_support.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

namespace canopy::trees {
namespace {

using testing::expect_throw;
using testing::same_bits;
using testing::temp_dir;

constexpr float nan_f = std::numeric_limits<float>::quiet_NaN();
constexpr float inf_f = std::numeric_limits<float>::infinity();

void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A binary file image: header fields as given, then the records.
std::string binary_image(const std::vector<point>& pts, std::uint64_t count, std::uint32_t version = 1,
                         std::uint32_t reserved = 0, const char* magic = "CNPYPTS1") {
  std::string s(24, '\0');
  std::memcpy(s.data(), magic, 8);
  std::memcpy(s.data() + 8, &version, 4);
  std::memcpy(s.data() + 12, &reserved, 4);
  std::memcpy(s.data() + 16, &count, 8);
  s.append(reinterpret_cast<const char*>(pts.data()), pts.size() * sizeof(point));
  return s;
}

// Values that stress exact round trips: signed zero, subnormals, extremes, shortest-repr cases.
std::vector<point> tricky_points() {
  return {{0.0f, -0.0f, 1.0f, 0.0f},
          {std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(), 1e-40f, 1e-45f},
          {std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest(), std::numeric_limits<float>::min(), 3e38f},
          {0.1f, 1.0f / 3.0f, -123456.789f, 16777217.0f},
          {1e-7f, 2.5f, -1e30f, 0.125f}};
}

// ------------------------------------------------------------- round trips -----------------------

TEST(PointIo, FormatFromExtension) {
  EXPECT_EQ(format_of("a/b.csv"), point_format::csv);
  EXPECT_EQ(format_of("a/b.CSV"), point_format::csv);
  EXPECT_EQ(format_of("a/b.pts"), point_format::binary);
  EXPECT_EQ(format_of("a/b"), point_format::binary);
}

TEST(PointIo, BinaryRoundTripIsBitExact) {
  temp_dir dir;
  auto pts = generate_plummer(10007, 3);
  const auto extra = tricky_points();
  pts.insert(pts.end(), extra.begin(), extra.end());
  write_points(dir / "p.pts", pts);
  EXPECT_EQ(std::filesystem::file_size(dir / "p.pts"), 24 + 16 * pts.size());
  EXPECT_TRUE(same_bits(read_points(dir / "p.pts"), pts));
  EXPECT_EQ(dir.files(), std::vector<std::string>{"p.pts"});  // no temporary left behind
}

TEST(PointIo, BinaryLayoutIsTheDocumentedOne) {
  temp_dir dir;
  const std::vector<point> pts{{1.0f, 2.0f, 3.0f, 4.0f}};
  write_points_binary(dir / "one", pts);
  EXPECT_EQ(read_bytes(dir / "one"), binary_image(pts, 1));
}

TEST(PointIo, CsvRoundTripIsExact) {
  temp_dir dir;
  auto pts = generate_clusters(2001, 8);
  const auto extra = tricky_points();
  pts.insert(pts.end(), extra.begin(), extra.end());
  write_points(dir / "p.csv", pts);
  EXPECT_EQ(read_bytes(dir / "p.csv").substr(0, 8), "x,y,z,m\n");
  EXPECT_TRUE(same_bits(read_points(dir / "p.csv"), pts));
  EXPECT_EQ(dir.files(), std::vector<std::string>{"p.csv"});
}

TEST(PointIo, EmptyRoundTrips) {
  temp_dir dir;
  write_points(dir / "e.pts", {});
  write_points(dir / "e.csv", {});
  EXPECT_EQ(std::filesystem::file_size(dir / "e.pts"), 24u);
  EXPECT_TRUE(read_points(dir / "e.pts").empty());
  EXPECT_TRUE(read_points(dir / "e.csv").empty());
}

TEST(PointIo, CsvAcceptsWhitespaceCrlfPlusAndBlankLines) {
  temp_dir dir;
  write_bytes(dir / "w.csv", "x,y,z,m\r\n 1, +2.5 ,3e-1,\t0.5\r\n\n-1,0,0,1e-3\n\n");
  const auto pts = read_points(dir / "w.csv");
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_TRUE(same_bits(pts[0], point{1.0f, 2.5f, 0.3f, 0.5f}));
  EXPECT_TRUE(same_bits(pts[1], point{-1.0f, 0.0f, 0.0f, 1e-3f}));
}

TEST(PointIo, OverwriteReplacesTheFile) {
  temp_dir dir;
  write_points(dir / "p.pts", generate_uniform(10, 1));
  const auto second = generate_uniform(20, 2);
  write_points(dir / "p.pts", second);
  EXPECT_TRUE(same_bits(read_points(dir / "p.pts"), second));
}

// ------------------------------------------------------------- binary rejections ----------------

TEST(PointIoBinary, RejectsMissingFile) {
  temp_dir dir;
  const auto e = expect_throw<input_error>([&] { read_points(dir / "missing.pts"); }, {"missing.pts", "no such file"});
  EXPECT_EQ(e.source(), (dir / "missing.pts").string());
}

TEST(PointIoBinary, RejectsWrongMagic) {
  temp_dir dir;
  write_bytes(dir / "m.pts", binary_image({}, 0, 1, 0, "CNPYPTSX"));
  expect_throw<input_error>([&] { read_points(dir / "m.pts"); }, {"m.pts", "no format recognised", "magic \"CNPYPTS1\""});
  expect_throw<input_error>([&] { read_points_binary(dir / "m.pts"); }, {"m.pts", "magic is not \"CNPYPTS1\""});
}

TEST(PointIoBinary, RejectsWrongVersion) {
  temp_dir dir;
  write_bytes(dir / "v.pts", binary_image({}, 0, 2));
  expect_throw<input_error>([&] { read_points(dir / "v.pts"); }, {"v.pts", "unsupported version 2"});
}

TEST(PointIoBinary, RejectsNonZeroReserved) {
  temp_dir dir;
  write_bytes(dir / "r.pts", binary_image({}, 0, 1, 9));
  expect_throw<input_error>([&] { read_points(dir / "r.pts"); }, {"r.pts", "reserved"});
}

TEST(PointIoBinary, RejectsTruncatedHeader) {
  temp_dir dir;
  write_bytes(dir / "h.pts", binary_image({}, 0).substr(0, 20));
  expect_throw<input_error>([&] { read_points(dir / "h.pts"); }, {"h.pts", "truncated header", "20 bytes"});
  write_bytes(dir / "zero.pts", "");
  expect_throw<input_error>([&] { read_points(dir / "zero.pts"); }, {"zero.pts", "empty file (0 bytes)"});
  // read_points_binary itself still says it of any file too short
  expect_throw<input_error>([&] { read_points_binary(dir / "zero.pts"); }, {"zero.pts", "truncated header", "0 bytes"});
}

TEST(PointIoBinary, RejectsTruncatedData) {
  temp_dir dir;
  const auto pts = generate_uniform(10, 1);
  const std::string image = binary_image(pts, 10);
  write_bytes(dir / "d.pts", image.substr(0, image.size() - 5));
  expect_throw<input_error>([&] { read_points(dir / "d.pts"); }, {"d.pts", "truncated data", "10 points"});
}

TEST(PointIoBinary, RejectsHugeCountWithoutOverflow) {
  temp_dir dir;
  write_bytes(dir / "huge.pts", binary_image(generate_uniform(2, 1), std::numeric_limits<std::uint64_t>::max()));
  expect_throw<input_error>([&] { read_points(dir / "huge.pts"); }, {"huge.pts", "truncated data"});
}

TEST(PointIoBinary, RejectsCountDisagreeingWithFileSize) {
  temp_dir dir;
  write_bytes(dir / "c.pts", binary_image(generate_uniform(10, 1), 9));  // one record too many
  expect_throw<input_error>([&] { read_points(dir / "c.pts"); }, {"c.pts", "count disagrees with file size", "9 points"});
  write_bytes(dir / "odd.pts", binary_image(generate_uniform(3, 1), 3) + "xyz");  // trailing partial record
  expect_throw<input_error>([&] { read_points(dir / "odd.pts"); }, {"odd.pts", "count disagrees"});
}

TEST(PointIoBinary, RejectsNaNCoordinate) {
  temp_dir dir;
  auto pts = generate_uniform(5, 1);
  pts[3].y = nan_f;
  write_bytes(dir / "nan.pts", binary_image(pts, 5));
  expect_throw<input_error>([&] { read_points(dir / "nan.pts"); }, {"nan.pts", "point 3", "non-finite coordinate y"});
}

TEST(PointIoBinary, RejectsInfiniteCoordinate) {
  temp_dir dir;
  auto pts = generate_uniform(5, 1);
  pts[0].z = -inf_f;
  write_bytes(dir / "inf.pts", binary_image(pts, 5));
  expect_throw<input_error>([&] { read_points(dir / "inf.pts"); }, {"inf.pts", "point 0", "non-finite coordinate z"});
}

TEST(PointIoBinary, RejectsNonFiniteMass) {
  temp_dir dir;
  auto pts = generate_uniform(5, 1);
  pts[4].m = inf_f;
  write_bytes(dir / "m.pts", binary_image(pts, 5));
  expect_throw<input_error>([&] { read_points(dir / "m.pts"); }, {"m.pts", "point 4", "non-finite mass"});
}

TEST(PointIoBinary, RejectsNegativeMass) {
  temp_dir dir;
  auto pts = generate_uniform(5, 1);
  pts[2].m = -0.25f;
  write_bytes(dir / "neg.pts", binary_image(pts, 5));
  expect_throw<input_error>([&] { read_points(dir / "neg.pts"); }, {"neg.pts", "point 2", "negative mass", "-0.25"});
}

// ------------------------------------------------------------- CSV rejections -------------------

TEST(PointIoCsv, RejectsMissingHeader) {
  temp_dir dir;
  write_bytes(dir / "h.csv", "1,2,3,4\n");
  expect_throw<input_error>([&] { read_points(dir / "h.csv"); }, {"h.csv", "line 1", "header"});
  write_bytes(dir / "empty.csv", "");
  expect_throw<input_error>([&] { read_points(dir / "empty.csv"); }, {"empty.csv", "empty file"});
}

TEST(PointIoCsv, RejectsTooFewFields) {
  temp_dir dir;
  write_bytes(dir / "few.csv", "x,y,z,m\n1,2,3,4\n1,2,3\n");
  expect_throw<input_error>([&] { read_points(dir / "few.csv"); }, {"few.csv", "line 3", "found 3 fields"});
}

TEST(PointIoCsv, RejectsTooManyFields) {
  temp_dir dir;
  write_bytes(dir / "many.csv", "x,y,z,m\n1,2,3,4,5\n");
  expect_throw<input_error>([&] { read_points(dir / "many.csv"); }, {"many.csv", "line 2", "found 5 fields"});
}

TEST(PointIoCsv, RejectsNonNumber) {
  temp_dir dir;
  write_bytes(dir / "word.csv", "x,y,z,m\n1,2,3,4\n\n1,two,3,4\n");
  expect_throw<input_error>([&] { read_points(dir / "word.csv"); }, {"word.csv", "line 4", "field 2", "'two'"});
  write_bytes(dir / "tail.csv", "x,y,z,m\n1,2,3,4x\n");
  expect_throw<input_error>([&] { read_points(dir / "tail.csv"); }, {"tail.csv", "line 2", "field 4"});
  write_bytes(dir / "blank.csv", "x,y,z,m\n1,,3,4\n");
  expect_throw<input_error>([&] { read_points(dir / "blank.csv"); }, {"blank.csv", "line 2", "field 2"});
}

TEST(PointIoCsv, RejectsOutOfRange) {
  temp_dir dir;
  write_bytes(dir / "big.csv", "x,y,z,m\n1e39,2,3,4\n");
  expect_throw<input_error>([&] { read_points(dir / "big.csv"); }, {"big.csv", "line 2", "out of float32 range"});
}

// One rule for float's range in every reader: a value below float32's smallest rounds (to a
// denormal or 0), as a float64 .npy's 1e-300 always did; the CSV reader used to refuse 1e-50.
TEST(PointIoCsv, TinyValuesRoundLikeEveryOtherReader) {
  temp_dir dir;
  write_bytes(dir / "tiny.csv", "x,y,z,m\n1e-50,-1e-60,1e-400,1e-45\n+1e-46,0.5,0.5,1\n");
  const auto p = read_points(dir / "tiny.csv");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].x, 0.0f);
  EXPECT_EQ(p[0].y, 0.0f);
  EXPECT_TRUE(std::signbit(p[0].y));
  EXPECT_EQ(p[0].z, 0.0f);
  EXPECT_EQ(p[0].m, std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(p[1].x, 0.0f);
}

TEST(PointIoCsv, RejectsNaNAndInfinity) {
  temp_dir dir;
  write_bytes(dir / "nan.csv", "x,y,z,m\n1,2,3,4\n1,2,nan,4\n");
  expect_throw<input_error>([&] { read_points(dir / "nan.csv"); }, {"nan.csv", "line 3", "non-finite coordinate z"});
  write_bytes(dir / "inf.csv", "x,y,z,m\n1,2,3,inf\n");
  expect_throw<input_error>([&] { read_points(dir / "inf.csv"); }, {"inf.csv", "line 2", "non-finite mass"});
}

TEST(PointIoCsv, RejectsNegativeMass) {
  temp_dir dir;
  write_bytes(dir / "neg.csv", "x,y,z,m\n1,2,3,-1\n");
  expect_throw<input_error>([&] { read_points(dir / "neg.csv"); }, {"neg.csv", "line 2", "negative mass"});
}

// ------------------------------------------------------------- writers --------------------------

TEST(PointIoWrite, RejectsInvalidPointsBeforeCreatingAnything) {
  temp_dir dir;
  auto pts = generate_uniform(4, 1);
  pts[1].x = nan_f;
  expect_throw<input_error>([&] { write_points(dir / "bad.pts", pts); }, {"bad.pts", "point 1"});
  expect_throw<input_error>([&] { write_points(dir / "bad.csv", pts); }, {"bad.csv", "point 1"});
  EXPECT_TRUE(dir.files().empty());
}

TEST(PointIoWrite, FailureLeavesNoFileAndKeepsTheOldOne) {
  temp_dir dir;
  EXPECT_THROW(write_points(dir / "no_such_dir" / "p.pts", generate_uniform(3, 1)), std::filesystem::filesystem_error);
  EXPECT_TRUE(dir.files().empty());
  // A rename onto a directory fails after the data was written: the temporary must go, the
  // existing entry must stay.
  std::filesystem::create_directory(dir / "taken.pts");
  EXPECT_THROW(write_points(dir / "taken.pts", generate_uniform(3, 1)), std::filesystem::filesystem_error);
  EXPECT_EQ(dir.files(), std::vector<std::string>{"taken.pts"});
  EXPECT_TRUE(std::filesystem::is_directory(dir / "taken.pts"));
}

}  // namespace
}  // namespace canopy::trees
