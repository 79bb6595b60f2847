// SPDX-License-Identifier: Apache-2.0
// The `canopy` tool as a user runs it: a spawned process, its exit code, stdout and stderr.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "canopy/mode.hpp"
#include "canopy/push_policy.hpp"
#include "run_tool.hpp"

namespace {

namespace fs = std::filesystem;
using canopy::test::slurp;

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// run(args) runs canopy, stdout and stderr captured in files (no shell, no quoting issues).
class CanopyTool : public canopy::test::tool_test {
 protected:
  CanopyTool() : tool_test("canopy_tool_test") {}

  // A binary point file made by the tool itself.
  fs::path generate(const std::string& name, const std::string& dist, int n, int seed = 1) const {
    const auto p = path(name);
    const auto r = run({"gen", "--dist", dist, "-n", std::to_string(n), "--seed", std::to_string(seed), "-o", p});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return p;
  }

  // Bad input: exit 2, exactly one line on stderr, "canopy: error: <subject>: <problem>", no stdout.
  void expect_bad_input(const std::vector<std::string>& args, const std::string& mentions) const {
    expect_usage_error(args, mentions, /*only_line=*/true);
  }
};

// --- round trips -------------------------------------------------------------------------------

// `canopy modes` is how scripts (tools/gpu-check) learn the modes: exactly the library's table,
// one name per line, in its order; --describe also names every push policy.
TEST_F(CanopyTool, ModesListsTheLibrarysTable) {
  const auto r = run({"modes"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string expected;
  for (const auto m : canopy::all_modes) expected += std::string(canopy::to_string(m)) + "\n";
  EXPECT_EQ(r.out, expected);
  const auto d = run({"modes", "--describe"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  for (const auto& m : canopy::mode_table) EXPECT_NE(d.out.find(std::string(m.summary)), std::string::npos) << m.name;
  for (const auto p : canopy::all_push_policies)
    EXPECT_NE(d.out.find(std::string(canopy::to_string(p))), std::string::npos) << canopy::to_string(p);
}

TEST_F(CanopyTool, GenBuildValidateRoundTrip) {
  const auto file = generate("uniform.bin", "uniform", 5000);
  EXPECT_EQ(fs::file_size(file), 24u + 16u * 5000u);  // the documented binary layout

  const auto build = run({"build", file, "--max-leaf", "16", "--check"});
  ASSERT_EQ(build.exit_code, 0) << build.err;
  EXPECT_NE(build.out.find("depth"), std::string::npos) << build.out;
  EXPECT_NE(build.out.find("leaf occupancy"), std::string::npos) << build.out;
  EXPECT_NE(build.out.find("build time"), std::string::npos) << build.out;

  const auto acc = run({"accumulate", file, "--backend", "reference"});
  ASSERT_EQ(acc.exit_code, 0) << acc.err;
  EXPECT_NE(acc.out.find("count     5000"), std::string::npos) << acc.out;

  const auto val = run({"validate", file, "--backend", "reference", "--max-leaf", "16"});
  EXPECT_EQ(val.exit_code, 0) << val.out << val.err;
  EXPECT_NE(val.out.find("PASS"), std::string::npos) << val.out;
  EXPECT_NE(val.out.find("counts    match exactly"), std::string::npos) << val.out;
}

TEST_F(CanopyTool, CsvAndBinaryGiveTheSameRoot) {
  const auto bin = path("p.bin"), csv = path("p.csv");
  ASSERT_EQ(run({"gen", "--dist", "plummer", "-n", "3001", "--seed", "7", "-o", bin}).exit_code, 0);
  ASSERT_EQ(run({"gen", "--dist", "plummer", "-n", "3001", "--seed", "7", "-o", csv}).exit_code, 0);
  EXPECT_EQ(slurp(csv).rfind("x,y,z,m\n", 0), 0u);
  const auto a = run({"accumulate", bin, "--backend", "reference", "--json"});
  const auto b = run({"accumulate", csv, "--backend", "reference", "--json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["root"]["count"], 3001);
  EXPECT_EQ(ja["root"], jb["root"]);  // CSV round-trips floats exactly
}

TEST_F(CanopyTool, GenIsDeterministic) {
  const auto a = generate("a.bin", "clusters", 2000, 3), b = generate("b.bin", "clusters", 2000, 3),
             c = generate("c.bin", "clusters", 2000, 4);
  EXPECT_EQ(slurp(a), slurp(b));
  EXPECT_NE(slurp(a), slurp(c));
}

TEST_F(CanopyTool, LatticeGivesACompleteTree) {
  // The spec builds the complete octree directly.
  const auto r = run({"build", "gen:lattice:2:3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["complete"]);
  EXPECT_EQ(j["points"], 192);
  EXPECT_EQ(j["depth"], 2);
  EXPECT_EQ(j["nodes"], 1 + 8 + 64);
  EXPECT_EQ(j["leaves"], 64);
  // The same points from a file are built adaptively (the root cell is their padded bounding
  // cube, not the unit cube), so only the points are guaranteed to be the same.
  const auto file = path("lattice.bin");
  ASSERT_EQ(run({"gen", "--dist", "lattice", "--depth", "2", "--per-leaf", "3", "-o", file}).exit_code, 0);
  EXPECT_EQ(fs::file_size(file), 24u + 16u * 192u);
  const auto a = run({"accumulate", file, "--backend", "reference", "--json"});
  const auto b = run({"accumulate", "gen:lattice:2:3", "--backend", "reference", "--json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto ja = nlohmann::json::parse(a.out)["root"], jb = nlohmann::json::parse(b.out)["root"];
  EXPECT_EQ(ja["count"], 192);
  EXPECT_EQ(ja["bbox"], jb["bbox"]);
  EXPECT_NEAR(ja["mass"].get<double>(), jb["mass"].get<double>(), 1e-12);
}

TEST_F(CanopyTool, ValidateReferenceOverSizesAndDistributions) {
  // Sizes 0, 1, odd and large; several seeds; a complete tree.
  for (const char* spec : {"gen:uniform:0", "gen:uniform:1", "gen:plummer:1001:2", "gen:clusters:20000:5",
                           "gen:lattice:3:5:9"}) {
    const auto r = run({"validate", spec, "--backend", "reference", "--max-leaf", "8", "--json"});
    EXPECT_EQ(r.exit_code, 0) << spec << "\n" << r.out << r.err;
    if (r.exit_code != 0) continue;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["counts_match"]) << spec;
    EXPECT_TRUE(j["within_tolerance"]) << spec;
  }
}

TEST_F(CanopyTool, ValidateTwigAndBucketTasksOnTheCpuBackend) {
  // --tasks twig|bucket: a complete tree (all twigs) and adaptive ones (twigs, plain nodes, loose
  // leaves; buckets and big nodes).
  for (const char* spec : {"gen:lattice:3:8", "gen:plummer:5001:3", "gen:clusters:20000:4", "gen:uniform:1"}) {
    for (const char* mode : {"continuation", "mutex"}) {
      for (const char* tasks : {"twig", "bucket"}) {
        const auto r = run({"validate", spec, "--backend", "cpu", "--tasks", tasks, "--mode", mode, "--max-leaf", "8",
                            "--json"});
        EXPECT_EQ(r.exit_code, 0) << spec << " " << mode << " " << tasks << "\n" << r.out << r.err;
        if (r.exit_code != 0) continue;
        const auto j = nlohmann::json::parse(r.out);
        EXPECT_TRUE(j["counts_match"]) << spec << " " << tasks;
        EXPECT_TRUE(j["within_tolerance"]) << spec << " " << tasks;
      }
    }
  }
}

// --deadline-ms 0.01 truncated to 0 ms and was refused as "deadline must be positive"; the deadline
// has millisecond resolution, and the tool says so in one line (exit 2). A fraction above 1 rounds up.
TEST_F(CanopyTool, DeadlineBelowOneMillisecondIsRefusedClearly) {
  const auto tiny = run({"validate", "gen:lattice:2:8", "--backend", "cpu", "--deadline-ms", "0.01"});
  EXPECT_EQ(tiny.exit_code, 2);
  EXPECT_NE(tiny.err.find("millisecond resolution"), std::string::npos) << tiny.err;
  const auto word = run({"validate", "gen:lattice:2:8", "--backend", "cpu", "--deadline-ms", "soon"});
  EXPECT_EQ(word.exit_code, 2);
  EXPECT_NE(word.err.find("not a number of milliseconds"), std::string::npos) << word.err;
  const auto fraction = run({"validate", "gen:lattice:2:8", "--backend", "cpu", "--deadline-ms", "1.5"});
  EXPECT_EQ(fraction.exit_code, 0) << fraction.err;
}

TEST_F(CanopyTool, TasksAutoIsNodeTasksOnTheCpuAndUnknownTasksAreRefused) {
  // auto (the default) picks twig tasks on the gpu backend only; the text output names the choice.
  const auto dflt = run({"validate", "gen:lattice:2:8", "--backend", "cpu"});
  EXPECT_EQ(dflt.exit_code, 0) << dflt.out << dflt.err;
  EXPECT_NE(dflt.out.find("node tasks"), std::string::npos) << dflt.out;
  const auto twig = run({"validate", "gen:lattice:2:8", "--backend", "cpu", "--tasks", "twig"});
  EXPECT_EQ(twig.exit_code, 0) << twig.out << twig.err;
  EXPECT_NE(twig.out.find("twig tasks"), std::string::npos) << twig.out;
  const auto bad = run({"validate", "gen:lattice:2:8", "--backend", "cpu", "--tasks", "leaf"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--tasks"), std::string::npos) << bad.err;
}

// The GPU build's options: bad values and combinations are one line and exit 2 on any machine;
// without a device (CI), asking for a GPU build fails with one line instead of crashing.
TEST_F(CanopyTool, GpuBuildOptionsAreChecked) {
  expect_usage_error({"build", "gen:lattice:2:8", "--on", "cuda"}, "--on", /*only_line=*/false);  // + CLI11's help hint
  expect_bad_input({"validate", "gen:lattice:2:8", "--backend", "cpu", "--build", "gpu"}, "needs --backend gpu");
  expect_bad_input({"accumulate", "gen:lattice:2:8", "--backend", "reference", "--build", "gpu"}, "needs --backend gpu");
  expect_usage_error({"validate", "gen:lattice:2:8", "--build", "device"}, "--build", /*only_line=*/false);
  expect_bad_input({"validate", "gen:lattice:2:8", "--backend", "gpu", "--build", "gpu"}, "lattice");
  expect_bad_input({"build", "gen:lattice:2:8", "--on", "gpu"}, "lattice");
  // With a device the GPU build must equal the host's (exit 0, said in the output); without one
  // (CI) the same commands must fail with one line naming the GPU build, not crash.
  const auto r = run({"build", "gen:plummer:3000:5", "--on", "gpu"});
  if (r.exit_code == 0) EXPECT_NE(r.out.find("node for node the host's tree"), std::string::npos) << r.out;
  else EXPECT_NE(r.err.find("gpu build"), std::string::npos) << r.err;
}  // `canopy bench build`: tests/cpu/bench/bench_tool_test.cpp (presets without the benchmarks lack it)

TEST_F(CanopyTool, DotWritesTheTaskGraph) {
  const auto out = path("tree.dot");
  const auto r = run({"dot", "gen:uniform:500", "--max-leaf", "16", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto text = slurp(out);
  EXPECT_NE(text.find("digraph"), std::string::npos);
  EXPECT_NE(text.find("->"), std::string::npos);
  expect_no_leftovers();
}

TEST_F(CanopyTool, HelpForEveryCommand) {
  for (const char* cmd : {"gen", "build", "accumulate", "validate", "dot"}) {
    const auto r = run({cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << cmd << r.err;
    EXPECT_NE(r.out.find(std::string("canopy ") + cmd), std::string::npos) << r.out;
  }
  const auto top = run({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.out.find("validate"), std::string::npos);
}

TEST_F(CanopyTool, LogLevelSilencesProgress) {
  const auto r = run({"build", "gen:uniform:100", "--log-level", "warn"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  const auto chatty = run({"--log-level", "debug", "build", "gen:uniform:100"});
  EXPECT_EQ(chatty.exit_code, 0);
  EXPECT_NE(chatty.err.find("built octree"), std::string::npos) << chatty.err;
}

// --- bad input: one line on stderr, exit 2, nothing written --------------------------------------

TEST_F(CanopyTool, MissingFile) {
  expect_bad_input({"build", path("nope.bin")}, "nope.bin: no such file");
  expect_bad_input({"validate", path("nope.bin"), "--backend", "reference"}, "nope.bin");
}

TEST_F(CanopyTool, DirectoryAsFile) { expect_bad_input({"build", dir_}, "is a directory"); }

TEST_F(CanopyTool, TruncatedFile) {
  const auto file = generate("t.bin", "uniform", 100);
  auto bytes = slurp(file);
  spit(file, bytes.substr(0, bytes.size() - 5));
  expect_bad_input({"build", file}, "t.bin");
  spit(file, bytes.substr(0, 10));  // not even a header
  expect_bad_input({"accumulate", file, "--backend", "reference"}, "t.bin");
}

TEST_F(CanopyTool, CountDisagreesWithSize) {
  const auto file = generate("c.bin", "uniform", 100);
  spit(file, slurp(file) + std::string(16, '\0'));
  expect_bad_input({"build", file}, "c.bin");
}

TEST_F(CanopyTool, WrongMagic) {
  const auto file = generate("m.bin", "uniform", 100);
  auto bytes = slurp(file);
  bytes.replace(0, 8, "NOTCANPY");
  spit(file, bytes);
  expect_bad_input({"build", file}, "m.bin");
}

TEST_F(CanopyTool, NaNCoordinate) {
  const auto file = generate("nan.bin", "uniform", 100);
  auto bytes = slurp(file);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + 24 + 16 * 42 + 4, &nan, sizeof nan);  // point 42's y
  spit(file, bytes);
  expect_bad_input({"validate", file, "--backend", "reference"}, "nan.bin");

  const auto csv = path("nan.csv");
  spit(csv, "x,y,z,m\n0.5,0.5,0.5,1\nnan,0.25,0.25,1\n");
  expect_bad_input({"build", csv}, "nan.csv");
}

TEST_F(CanopyTool, NegativeMass) {
  const auto csv = path("neg.csv");
  spit(csv, "x,y,z,m\n0.5,0.5,0.5,1\n0.1,0.25,0.25,-1\n");
  expect_bad_input({"accumulate", csv, "--backend", "reference"}, "neg.csv");
}

TEST_F(CanopyTool, BadOption) {
  const auto r = run({"build", "gen:uniform:10", "--bogus"});
  EXPECT_EQ(r.exit_code, 2);
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 2u) << r.err;  // the error, then where to find help
  EXPECT_EQ(lines[0].rfind("canopy: error: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("--bogus"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("canopy build --help"), std::string::npos) << lines[1];

  for (const std::vector<std::string>& args :
       {std::vector<std::string>{}, {"frobnicate"}, {"validate", "x.bin", "--backend", "quantum"},
        {"accumulate", "x.bin", "--mode", "fastest"}, {"accumulate", "x.bin", "--tasks", "leaf"},
        {"build", "x.bin", "--max-depth", "22"},
        {"gen", "--dist", "uniform", "-n", "-5", "-o", "x.bin"}}) {
    const auto bad = run(args);
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_EQ(bad.err.rfind("canopy: error: ", 0), 0u) << bad.err;
  }
}

TEST_F(CanopyTool, BadValuesWriteNothing) {
  const auto out = path("out.bin");
  expect_bad_input({"gen", "--dist", "gaussian", "-n", "10", "-o", out}, "gaussian");
  expect_bad_input({"gen", "--dist", "lattice", "-n", "10", "-o", out}, "-n");
  expect_bad_input({"gen", "--dist", "uniform", "-o", out}, "-n");
  expect_bad_input({"gen", "--dist", "uniform", "-n", "10", "-o", path("no/such/dir/out.bin")}, "directory");
  expect_bad_input({"build", "gen:plummer:lots"}, "gen:plummer:lots");
  expect_bad_input({"build", "gen:tipsy:10"}, "tipsy");
  expect_bad_input({"dot", path("missing.bin"), "-o", path("tree.dot")}, "missing.bin");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(path("tree.dot")));
  expect_no_leftovers();
}

TEST_F(CanopyTool, FailedRewriteKeepsTheOldFile) {
  const auto file = generate("keep.bin", "uniform", 50);
  const auto before = slurp(file);
  expect_bad_input({"gen", "--dist", "nonsense", "-n", "10", "-o", file}, "nonsense");
  EXPECT_EQ(slurp(file), before);
  expect_no_leftovers();
}

// --- other programs' point files ---------------------------------------------------------------

// A little-endian Tipsy file (32-byte header): gas particle (1, 2, 3) mass 0.5, dark (4, 5, 6)
// mass 2 and dark (-1, 0, 1) mass 1.
std::string small_tipsy() {
  std::string s;
  const auto put = [&](auto v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(0.0);
  for (const std::int32_t v : {3, 3, 1, 2, 0, 0}) put(v);
  for (const float v : {0.5f, 1.0f, 2.0f, 3.0f}) put(v);
  for (int k = 4; k < 12; ++k) put(0.0f);
  for (const auto& r : {std::vector<float>{2.0f, 4.0f, 5.0f, 6.0f}, std::vector<float>{1.0f, -1.0f, 0.0f, 1.0f}}) {
    for (const float v : r) put(v);
    for (int k = 4; k < 9; ++k) put(0.0f);
  }
  return s;
}

TEST_F(CanopyTool, ConvertReadsOtherFormatsByContent) {
  spit(path("snap"), small_tipsy());
  const auto r = run({"convert", path("snap"), path("all.csv")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "converted 3 points from " + path("snap").string() + " (tipsy) to " + path("all.csv").string() + " (CSV)\n");
  EXPECT_EQ(slurp(path("all.csv")), "x,y,z,m\n1,2,3,0.5\n4,5,6,2\n-1,0,1,1\n");
  const auto d = run({"convert", path("snap"), path("dark.pts"), "--family", "dark"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.out.find("converted 2 points"), std::string::npos) << d.out;
  EXPECT_EQ(std::filesystem::file_size(path("dark.pts")), 24u + 2 * 16);
  spit(path("cloud.ply"), "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\n"
                          "property float z\nproperty float weight\nelement face 1\nproperty list uchar int v\n"
                          "end_header\n1 2 3 4\n5 6 7 8\n2 0 1\n");
  const auto p = run({"convert", path("cloud.ply"), path("cloud.csv")});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(slurp(path("cloud.csv")), "x,y,z,m\n1,2,3,4\n5,6,7,8\n");
  // Every command that reads points takes the other formats and the choice of particles.
  const auto b = run({"build", path("snap"), "--family", "gas"});
  EXPECT_EQ(b.exit_code, 0) << b.err;
  expect_no_leftovers();
}

TEST_F(CanopyTool, ConvertRejectsBadInputWithOneLineAndNoFile) {
  std::string cut = small_tipsy();
  cut.resize(cut.size() - 5);  // shorter than even the unpadded form
  spit(path("cut"), cut);
  expect_bad_input({"convert", path("cut"), path("out.csv")}, "truncated data");
  spit(path("cloud.ply"), "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nend_header\n1\n");
  expect_bad_input({"convert", path("cloud.ply"), path("out.csv")}, "no 'y' property");
  spit(path("snap"), small_tipsy());
  expect_bad_input({"convert", path("snap"), path("out.csv"), "--type", "1"}, "Gadget particle type (1)");
  expect_bad_input({"convert", "gen:uniform:10", path("out.csv"), "--family", "gas"}, "--family");
  expect_bad_input({"build", "gen:uniform:10", "--type", "0"}, "--type");
  EXPECT_FALSE(std::filesystem::exists(path("out.csv")));
  expect_no_leftovers();
}

}  // namespace
