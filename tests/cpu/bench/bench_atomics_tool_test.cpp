// SPDX-License-Identifier: Apache-2.0
// `canopy bench atomics` as a user runs it, without a device (label cpu): its help, the one line
// and exit 0 when no CUDA device is usable (CUDA_VISIBLE_DEVICES=-1 hides any there is, so this
// runs the same on the GPU machine), bad options; and tools/plot/plot_atomics.py on a trimmed H100
// result (skipped when /usr/bin/python3 lacks matplotlib).
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "run_tool.hpp"

namespace {

namespace fs = std::filesystem;
using canopy::test::lines_of;
using canopy::test::slurp;

class BenchAtomics : public canopy::test::tool_test {
 protected:
  BenchAtomics() : tool_test("canopy_bench_atomics_test") {}

  // canopy with no CUDA device visible, whatever the machine has.
  canopy::test::tool_run canopy(std::vector<std::string> args) const {
    return run(std::move(args), {"CUDA_VISIBLE_DEVICES=-1"});
  }
};

TEST_F(BenchAtomics, help_lists_the_lab_options) {
  const auto r = canopy({"bench", "atomics", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* want : {"atomics lab", "--sizes", "--reps", "--experiments", "--json", "--csv", "--plot"})
    EXPECT_NE(r.out.find(want), std::string::npos) << "help lacks " << want << ":\n" << r.out;
  // `canopy bench --help` names the subcommand.
  const auto b = canopy({"bench", "--help"});
  EXPECT_EQ(b.exit_code, 0);
  EXPECT_NE(b.out.find("atomics"), std::string::npos) << b.out;
}

TEST_F(BenchAtomics, without_a_device_one_line_and_exit_0) {
  const auto json = path("lab.json");
  const auto r = canopy({"bench", "atomics", "--sizes", "1M", "--reps", "3", "--json", json.string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto lines = lines_of(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("canopy: warning: bench atomics: the atomics lab needs a CUDA device", 0), 0u) << lines[0];
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(json)) << "nothing measured, nothing written";
}

TEST_F(BenchAtomics, bad_options_are_one_line_and_exit_2) {
  struct bad {
    std::vector<std::string> args;
    std::string mentions;
  };
  for (const bad& b : {bad{{"--sizes", "1Q"}, "--sizes"}, bad{{"--sizes", "4G"}, "--sizes"},
                       bad{{"--experiments", "max,nope"}, "nope"}, bad{{"--reps", "0"}, "--reps"},
                       bad{{"--depths", "3"}, "--depths"}, bad{{"--json", "/no/such/dir/x.json"}, "--json"}}) {
    std::vector<std::string> args = {"bench", "atomics"};
    args.insert(args.end(), b.args.begin(), b.args.end());
    const auto r = canopy(args);
    EXPECT_EQ(r.exit_code, 2) << b.args[0] << ": " << r.out << r.err;
    const auto lines = lines_of(r.err);
    ASSERT_GE(lines.size(), 1u) << r.err;
    EXPECT_EQ(lines[0].rfind("canopy: error: ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find(b.mentions), std::string::npos) << lines[0] << " should mention " << b.mentions;
  }
}

TEST_F(BenchAtomics, plot_script_draws_the_h100_fixture) {
  if (run_program({"/usr/bin/python3", "-c", "import matplotlib"}).exit_code != 0)
    GTEST_SKIP() << "/usr/bin/python3 with matplotlib is not available";
  const auto stem = path("h100");
  const auto r = run_program({"/usr/bin/python3", CANOPY_ATOMICS_PLOT_SCRIPT, CANOPY_ATOMICS_FIXTURE, "-o", stem.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("wrote"), std::string::npos) << r.out;
  EXPECT_GT(fs::file_size(path("h100.png")), 10000u);
  const std::string svg = slurp(path("h100.svg"));
  for (const char* want : {"<svg", "NVIDIA H100", "cub_select_if", "cub_histogram_even", "warp_aggregated"})
    EXPECT_NE(svg.find(want), std::string::npos) << "SVG lacks " << want;
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();

  // The octree benchmark's JSON (or anything else) is refused with one line, not drawn.
  std::ofstream(path("octree.json")) << R"({"schema": "canopy-bench-octree/1", "results": []})";
  const auto wrong = run_program({"/usr/bin/python3", CANOPY_ATOMICS_PLOT_SCRIPT, path("octree.json").string(), "-o",
                            path("x").string()});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("not an atomics lab result"), std::string::npos) << wrong.err;
  EXPECT_FALSE(fs::exists(path("x.png")));
}

}  // namespace
