// SPDX-License-Identifier: Apache-2.0
// The `canopy` tool against extreme options and values (issue 39): options that size an
// allocation, deadlines that overflow, range errors, float payloads that overflow, huge leaves,
// unknown commands, echoed bytes, and the exit-code rule. Each test failed before its fix.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_tool.hpp"

namespace {

namespace fs = std::filesystem;

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

class CanopyLimits : public canopy::test::tool_test {
 protected:
  CanopyLimits() : tool_test("canopy_limits_test") {}

  // canopy under /bin/sh with `limits` applied first ("ulimit -v 2000000", "trap '' XFSZ; ulimit -f 4").
  canopy::test::tool_run run_limited(const std::string& limits, std::vector<std::string> args) const {
    std::vector<std::string> argv{"/bin/sh", "-c", limits + " && exec \"$0\" \"$@\"", canopy::test::canopy_tool_path()};
    argv.insert(argv.end(), args.begin(), args.end());
    return canopy::test::run_process(argv, dir_);
  }

  // One error line (after any progress lines), exit `code`, mentioning `mentions`, at most
  // `longest` characters.
  static void expect_one_line(const canopy::test::tool_run& r, int code, const std::string& mentions,
                              std::size_t longest = 300) {
    EXPECT_EQ(r.exit_code, code) << r.out << r.err;
    std::vector<std::string> lines;
    for (const auto& line : r.err_lines())
      if (line.rfind("canopy: info: ", 0) != 0 && line.rfind("canopy: warning: ", 0) != 0) lines.push_back(line);
    ASSERT_GE(lines.size(), 1u) << r.err;
    EXPECT_EQ(lines[0].rfind("canopy: error: ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find(mentions), std::string::npos) << lines[0];
    EXPECT_LE(lines[0].size(), longest) << lines[0];
  }
};

// --queue-capacity 2147483647 on a 2,000-task tree allocated 24 GB (the OOM killer ended it, no
// message). The capacity is capped at the task count: under a 2 GB address-space limit the run is
// exact; before the cap it ran out of memory (exit 3).
TEST_F(CanopyLimits, QueueCapacityIsCappedAtTheTaskCount) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of shadow address space: no 2 GB limit can hold it";
#endif
  const auto r = run_limited("ulimit -v 2000000", {"validate", "gen:plummer:2000", "--backend", "cpu",
                                                   "--queue-capacity", "2147483647"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
}

// More CPU workers than the backend starts is refused before any thread, with the same exit code
// from every command (accumulate said 2, bench 3).
TEST_F(CanopyLimits, TooManyWorkersIsBadInputInEveryCommand) {
  expect_one_line(run({"accumulate", "gen:uniform:1000", "--backend", "cpu", "--blocks", "100000"}), 2, "at most 4096");
  expect_one_line(run({"run-dag", CANOPY_EXAMPLE_DAG, "--backend", "cpu", "--blocks", "100000"}), 2, "at most 4096");
  if (!CANOPY_TOOL_HAS_BENCH) return;  // a build without the benchmarks has no `bench` options
  expect_one_line(run({"bench", "--depths", "1", "--backend", "cpu", "--cpu-workers", "100000"}), 2, "4096");
  expect_one_line(run({"bench", "--depths", "1", "--backend", "cpu", "--blocks", "100000", "--reps", "1"}), 2, "4096");
}

// Range errors printed DBL_MAX in 300 digits (CLI11's NonNegativeNumber / PositiveNumber).
TEST_F(CanopyLimits, RangeErrorsAreShort) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"accumulate", "gen:uniform:10", "--blocks", "-1"},
        {"accumulate", "gen:uniform:10", "--queue-capacity", "-1"},
        {"bench", "--depths", "1", "--budget-ms", "0"},
        {"bench", "--depths", "1", "--cpu-workers", "-1"}}) {
    if (args[0] == "bench" && !CANOPY_TOOL_HAS_BENCH) continue;
    const auto r = run(args);
    expect_one_line(r, 2, args[args.size() - 2], 160);
    EXPECT_EQ(r.err.find("17976931348623157"), std::string::npos) << r.err;
  }
}

// --budget-ms 1e19 overflowed the deadline: every mode failed with "deadline must be positive"
// (exit 3). Range-checked as --deadline-ms is.
TEST_F(CanopyLimits, BudgetBeyondTheDeadlineRangeIsRefused) {
  expect_one_line(run({"validate", "gen:uniform:10", "--backend", "cpu", "--deadline-ms", "1e19"}), 2, "at most 1e12");
  expect_one_line(run({"validate", "gen:uniform:10", "--backend", "cpu", "--deadline-ms", "nan"}), 2,
                  "'nan' is not a number of milliseconds");
  if (!CANOPY_TOOL_HAS_BENCH) return;  // a build without the benchmarks has no `bench` options
  expect_one_line(run({"bench", "--depths", "1", "--budget-ms", "1e19"}), 2, "at most 1e12");
  expect_one_line(run({"bench", "--depths", "1", "--budget-ms", "nan"}), 2, "'nan' is not a number of milliseconds");
  const auto ok = run({"bench", "--depths", "1", "--backend", "cpu", "--modes", "continuation", "--reps", "1",
                       "--warmup", "0", "--budget-ms", "1e12"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
}

// `canopy nosuch` said "A subcommand is required".
TEST_F(CanopyLimits, AnUnknownCommandIsNamed) {
  const auto r = run({"nosuch"});
  expect_one_line(r, 2, "'nosuch': unknown command");
  EXPECT_NE(r.err.find("accumulate"), std::string::npos) << r.err;
  expect_one_line(run({""}), 2, "'': unknown command");
  const auto escaped = run({"--log-level", "off", "no\x1b[31msuch"});
  expect_one_line(escaped, 2, "unknown command");
  EXPECT_EQ(escaped.err.find('\x1b'), std::string::npos) << escaped.err;
}

// 1,000 masses of 1e36 summed to inf: `accumulate` printed "mass inf", "m2 -nan", exit 0. The
// builder bounds mass x extent^2 so that the float moments cannot overflow.
TEST_F(CanopyLimits, MassesWhoseMomentsWouldOverflowAreRefused) {
  std::string csv = "x,y,z,m\n";
  for (int i = 0; i < 1000; ++i) csv += std::to_string(i % 10) + "," + std::to_string(i / 10 % 10) + ",0.5,1e36\n";
  spit(path("heavy.csv"), csv);
  for (const char* backend : {"cpu", "reference"}) {
    const auto r = run({"accumulate", path("heavy.csv"), "--backend", backend});
    expect_one_line(r, 2, "would overflow");
    EXPECT_EQ(r.out.find("inf"), std::string::npos) << r.out;
  }
  // Mass 1e20 at coordinates near 2^49: each point is fine, mass x coordinate^2 is not.
  spit(path("far.csv"), "x,y,z,m\n5.6e14,0,0,1e20\n-5.6e14,1,1,1e20\n");
  expect_one_line(run({"accumulate", path("far.csv"), "--backend", "cpu"}), 2, "would overflow");
  // Large but representable: accepted, finite.
  spit(path("fine.csv"), "x,y,z,m\n0,0,0,1e30\n1,1,1,1e30\n");
  const auto fine = run({"accumulate", path("fine.csv"), "--backend", "cpu", "--json"});
  ASSERT_EQ(fine.exit_code, 0) << fine.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(fine.out)["root"]["mass"].get<double>(), static_cast<double>(2e30f));
}

// One leaf of 500,000 points (max depth 0): plain float summation lost mass, and the bound that
// covered it (6% of the mass) checked nothing. Leaves are summed in compensated blocks on the cpu
// backend, and the bound is small.
TEST_F(CanopyLimits, OneHugeLeafIsSummedAccuratelyUnderASmallBound) {
  const auto r = run({"validate", "gen:uniform:500000", "--max-depth", "0", "--backend", "cpu", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["within_tolerance"].get<bool>());
  EXPECT_TRUE(j["bounds_meaningful"].get<bool>());
  EXPECT_LT(j["mass"]["bound"].get<double>(), 1e-4) << r.out;
  EXPECT_LT(j["mass"]["worst"].get<double>(), 1e-6) << r.out;
  EXPECT_LT(j["com"]["worst"].get<double>(), 1e-6) << r.out;
}

// A finite float64 beyond float's range was "non-finite coordinate x = inf"; CSV refused 1e-50
// where npy turned 1e-300 into 0. One rule: beyond float's largest is refused and said so; below
// its smallest rounds (to a denormal or 0).
TEST_F(CanopyLimits, FloatRangeIsOneRuleForEveryReader) {
  // (2, 3) float64 .npy, little-endian: 1e300 in row 1, x.
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
  header.append((10 + header.size() + 1 + 63) / 64 * 64 - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string npy = std::string("\x93NUMPY\x01\x00", 8);
  npy += static_cast<char>(header.size() & 0xff);
  npy += static_cast<char>(header.size() >> 8);
  npy += header;
  const double values[6] = {0.5, 0.5, 0.5, 1e300, 0.25, 0.25};
  npy.append(reinterpret_cast<const char*>(values), sizeof values);
  spit(path("big.npy"), npy);
  const auto big = run({"convert", path("big.npy"), path("out.bin")});
  expect_one_line(big, 2, "row 1: coordinate x = 1.0000000000000001e+300 is beyond float32's range");
  EXPECT_FALSE(fs::exists(path("out.bin")));

  spit(path("tiny.csv"), "x,y,z,m\n1e-50,0.5,0.5,1\n0.25,-1e-60,0.5,1e-45\n");
  const auto tiny = run({"convert", path("tiny.csv"), path("tiny_out.csv")});
  ASSERT_EQ(tiny.exit_code, 0) << tiny.err;
  spit(path("huge.csv"), "x,y,z,m\n1e39,0.5,0.5,1\n");
  expect_one_line(run({"convert", path("huge.csv"), path("huge_out.bin")}), 2, "out of float32 range");
}

// A file no reader recognises got the Canopy binary reader's message ("magic is not \"CNPYPTS1\"",
// "truncated header: 12 bytes"), as if it had to be that format. It now says that no format was
// recognised and what was looked for; an empty file says it is empty.
TEST_F(CanopyLimits, AnUnrecognisedFileSaysWhichFormatsAreRead) {
  spit(path("notes.txt"), "hello world\n");
  expect_one_line(run({"build", path("notes.txt")}), 2,
                  "notes.txt: not a points file: no format recognised (looked for the magic \"CNPYPTS1\" of Canopy "
                  "binary, \"\\x93NUMPY\" of NumPy or \"ply\" of PLY, the CSV header \"x,y,z,m\", a Tipsy or Gadget "
                  "header, then the extensions .csv, .ply, .npy, .tipsy, .std, .gadget)",
                  400);  // a long line: the test folder's name is in it
  spit(path("noise.dat"), std::string(100, '\x07'));
  expect_one_line(run({"accumulate", path("noise.dat"), "--backend", "cpu"}), 2, "noise.dat: not a points file: no format recognised", 400);
  spit(path("x y z m.txt"), "x y z m\n1 2 3 4\n");
  expect_one_line(run({"convert", path("x y z m.txt"), path("o.bin")}), 2, "the CSV header \"x,y,z,m\"", 400);
  spit(path("empty"), "");
  expect_one_line(run({"convert", path("empty"), path("o.bin")}), 2, "empty: empty file (0 bytes): not a points file");
  // A file that starts as Canopy binary still gets that reader's message.
  spit(path("cut.bin"), "CNPYPTS1\x01");
  expect_one_line(run({"build", path("cut.bin")}), 2, "cut.bin: truncated header: 9 bytes");
  EXPECT_FALSE(fs::exists(path("o.bin")));
}

// CSV, PLY and npy errors echoed raw file bytes: a newline split the message, escape sequences
// reached the terminal, a NUL cut it, and a huge field made a huge line. Quoted, escaped, bounded.
TEST_F(CanopyLimits, EchoedBytesAreEscapedAndBounded) {
  static constexpr char control[] = "x,y,z,m\n0.5,\x1b[2J\rA\0B,0.5,1\n";
  spit(path("ctl.csv"), std::string(control, sizeof control - 1));
  const auto csv = run({"convert", path("ctl.csv"), path("o.bin")});
  expect_one_line(csv, 2, "field 2 is not a number: '\\x1b[2J\\x0dA\\x00B'");
  EXPECT_EQ(csv.err_lines().size(), 1u) << csv.err;

  spit(path("long.csv"), "x,y,z,m\n0.5," + std::string(100000, 'q') + ",0.5,1\n");
  expect_one_line(run({"convert", path("long.csv"), path("o.bin")}), 2, "(100000 bytes)", 200);

  // Arguments are echoed the same way (a generator spec's field, a deadline).
  const auto spec = run({"accumulate", "gen:uniform:1\x1b[2J", "--backend", "cpu"});
  expect_one_line(spec, 2, "N must be an integer in [0, 2147483647], not '1\\x1b[2J'");
  EXPECT_EQ(spec.err.find('\x1b'), std::string::npos) << spec.err;  // the spec as the subject too
  // A file name with a newline and an escape: one line, nothing for the terminal.
  const auto name = run({"accumulate", path("no\nsuch\x1b[2J.bin").string(), "--backend", "cpu"});
  expect_one_line(name, 2, "no\\x0asuch\\x1b[2J.bin");
  EXPECT_EQ(name.err.find('\x1b'), std::string::npos) << name.err;
  const auto word = run({"accumulate", "gen:uniform:10", "--deadline-ms", "1\x1b[2J"});
  expect_one_line(word, 2, "'1\\x1b[2J' is not a number of milliseconds");

  spit(path("bad.ply"), "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n"
                        "property float z\nend_header\n0.5 \x1b]0;owned\x07 0.5\n");
  const auto ply = run({"convert", path("bad.ply"), path("o.bin")});
  expect_one_line(ply, 2, "is not a number");
  EXPECT_EQ(ply.err.find('\x1b'), std::string::npos) << ply.err;
  EXPECT_EQ(ply.err.find('\x07'), std::string::npos) << ply.err;
}

// A full disk exited 2, "bad input". A write the machine refuses (here: past the file-size limit,
// EFBIG, like ENOSPC) is a failed run, exit 3; a missing folder stays bad input, exit 2.
TEST_F(CanopyLimits, AFullDiskIsAFailedRunNotBadInput) {
  const auto r = run_limited("trap '' XFSZ; ulimit -f 8", {"gen", "--dist", "uniform", "-n", "100000", "-o", path("big.bin")});
  expect_one_line(r, 3, "big.bin");
  expect_one_line(run({"gen", "--dist", "uniform", "-n", "10", "-o", path("no/such/dir.bin")}), 2, "dir.bin");
}

// A timeout promised the name of a stuck task; a chain left no counter part-way and the message
// named task -1.
TEST_F(CanopyLimits, ADagTimeoutNamesATask) {
  std::string dot = "digraph chain {\n";
  for (int i = 0; i + 1 < 100000; ++i) dot += "  " + std::to_string(i) + " -> " + std::to_string(i + 1) + ";\n";
  dot += "}\n";
  spit(path("chain.dot"), dot);
  const auto r = run({"run-dag", path("chain.dot"), "--backend", "cpu", "--mode", "lockfree", "--deadline-ms", "1"});
  if (r.exit_code == 0) GTEST_SKIP() << "the chain finished within 1 ms on this machine";
  expect_one_line(r, 3, "timeout");
  EXPECT_EQ(r.err.find("task -1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("never finished"), std::string::npos) << r.err;
}

// --json failed (exit 3, nlohmann's "invalid UTF-8 byte") when a file name was not UTF-8: the
// JSON now carries U+FFFD for such bytes and the run exits 0.
TEST_F(CanopyLimits, JsonOutputTakesAFileNameThatIsNotUtf8) {
  const std::string name = "caf\xe9.bin";
  ASSERT_EQ(run({"gen", "--dist", "uniform", "-n", "100", "-o", path(name)}).exit_code, 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"accumulate", path(name), "--backend", "cpu", "--json"},
        std::vector<std::string>{"validate", path(name), "--backend", "cpu", "--json"}}) {
    const auto r = run(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.out << r.err;
    EXPECT_TRUE(nlohmann::json::accept(r.out)) << r.out;
  }
}

// --seed of gen and bench wrapped or saturated (-1 and 2^64 gave 2^64 - 1 or 2^64 - 2, exit 0);
// they refuse as the gen: spec's SEED does.
TEST_F(CanopyLimits, SeedOutOfRangeIsRefused) {
  for (const std::string seed : {"-1", "18446744073709551616", "99999999999999999999999", "12x"}) {
    expect_one_line(run({"gen", "--dist", "uniform", "-n", "10", "--seed", seed, "-o", path("s.bin")}), 2,
                    "SEED must be an integer in [0, 18446744073709551615]");
    if (CANOPY_TOOL_HAS_BENCH)
      expect_one_line(run({"bench", "--depths", "1", "--seed", seed}), 2,
                      "SEED must be an integer in [0, 18446744073709551615]");
  }
  EXPECT_EQ(run({"gen", "--dist", "uniform", "-n", "10", "--seed", "18446744073709551615", "-o", path("s.bin")})
                .exit_code,
            0);
}

}  // namespace
