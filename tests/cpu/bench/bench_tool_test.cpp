// SPDX-License-Identifier: Apache-2.0
// `canopy bench` as a user runs it: a spawned process on the cpu backend, its exit code, stdout,
// stderr and the files it writes. Timings are never asserted.
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_tool.hpp"

namespace {

namespace fs = std::filesystem;
using canopy::test::slurp;

class CanopyBench : public canopy::test::tool_test {
 protected:
  CanopyBench() : tool_test("canopy_bench_tool_test") {}

  nlohmann::json read_json(const fs::path& p) const { return nlohmann::json::parse(slurp(p)); }

  void expect_bad_input(std::vector<std::string> args, const std::string& mentions) const {
    args.insert(args.begin(), "bench");
    expect_usage_error(args, mentions, /*only_line=*/false);
  }
};

TEST_F(CanopyBench, cpu_backend_depths_1_to_3_table_json_csv) {
  const auto json = path("r.json"), csv = path("r.csv");
  const auto r = run({"bench", "--backend", "cpu", "--depths", "1-3", "--reps", "3", "--warmup", "1", "--budget-ms",
                      "60000", "--json", json, "--csv", csv});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* want : {"depth 1:", "depth 3: 585 nodes", "continuation", "reference *", "median us by tree"})
    EXPECT_NE(r.out.find(want), std::string::npos) << "stdout lacks '" << want << "':\n" << r.out;
  // Progress on stderr, through the logger; a warning about fewer than 20 reps.
  EXPECT_NE(r.err.find("canopy: info: depth 2: continuation: ok"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("canopy: warning: --reps 3"), std::string::npos) << r.err;

  const auto j = read_json(json);
  EXPECT_EQ(j["schema"], "canopy-bench-octree/1");
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["options"]["reps"], 3);
  // On each depth: the 9 modes, 3 of them on twig tasks, the reference (default_variants).
  constexpr std::size_t per_depth = 9 + 3 + 1;
  ASSERT_EQ(j["results"].size(), 3u * per_depth);
  for (const auto& e : j["results"]) {
    EXPECT_EQ(e["status"], "ok") << e.dump();
    EXPECT_EQ(e["tree_kind"], "complete");
    EXPECT_EQ(e["per_leaf"], 8);
    EXPECT_FALSE(e["median_us"].is_null());
    EXPECT_GT(e["bytes"].get<double>(), 0);
  }
  EXPECT_EQ(j["results"][0]["mode"], "mutex");
  EXPECT_EQ(j["results"][9]["mode"], "lockfree-tree+twig");
  EXPECT_EQ(j["results"][11]["mode"], "warp-rounds+twig");
  EXPECT_EQ(j["results"][12]["mode"], "reference");
  EXPECT_EQ(j["results"][12]["backend"], "host");

  std::istringstream in(slurp(csv));
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_EQ(lines, 1 + 3 * static_cast<int>(per_depth));
  expect_no_leftovers();
}

TEST_F(CanopyBench, auto_backend_says_what_it_ran) {
  const auto json = path("r.json");
  const auto r = run({"bench", "--depths", "1", "--reps", "3", "--modes", "mutex,lockfree,reference", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = read_json(json);
  if (j["backend"] == "cpu") {
    // No device here: one line says so, on stderr and in the table's header.
    EXPECT_NE(r.err.find("the scheduler modes run on the cpu backend"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("the scheduler modes run on the cpu backend"), std::string::npos) << r.out;
  }
  ASSERT_EQ(j["results"].size(), 3u);
}

TEST_F(CanopyBench, a_wrong_result_is_reported_and_exits_1) {
  const auto json = path("r.json");
  const auto r = run({"bench", "--backend", "cpu", "--depths", "1-2", "--reps", "3", "--modes", "continuation,lockfree",
                      "--inject-wrong-result", "continuation", "--json", json});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL (wrong result"), std::string::npos) << r.out;
  const auto j = read_json(json);
  for (const auto& e : j["results"]) {
    if (e["mode"] == "continuation") {
      EXPECT_EQ(e["status"], "fail");
      EXPECT_TRUE(e["wrong_result"].get<bool>());
      EXPECT_TRUE(e["median_us"].is_null());
    } else {
      EXPECT_EQ(e["status"], "ok");
    }
  }
}

TEST_F(CanopyBench, over_budget_modes_are_skipped_for_deeper_trees) {
  const auto json = path("r.json");
  const auto r = run({"bench", "--backend", "cpu", "--depths", "1-3", "--modes", "continuation", "--budget-ms", "0.001",
                      "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = read_json(json);
  ASSERT_EQ(j["results"].size(), 3u);
  for (const auto& e : j["results"]) {
    EXPECT_EQ(e["status"], "skipped");
    EXPECT_TRUE(e["over_budget"].get<bool>());
  }
  EXPECT_NE(j["results"][2]["note"].get<std::string>().find("since depth 1"), std::string::npos) << j.dump(2);
  EXPECT_NE(r.err.find("tree not built"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("skipped (over budget"), std::string::npos) << r.out;
}

TEST_F(CanopyBench, adaptive_tree_from_a_generator) {
  const auto json = path("r.json");
  const auto r = run({"bench", "--backend", "cpu", "--dist", "plummer", "-n", "3000", "--max-leaf", "16", "--reps", "3",
                      "--modes", "continuation,reference", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = read_json(json);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["tree_kind"], "adaptive");
  EXPECT_EQ(j["results"][0]["points"], 3000);
  EXPECT_TRUE(j["results"][0]["per_leaf"].is_null());
  EXPECT_EQ(j["results"][0]["status"], "ok");
}

// `canopy bench build`: bad values are one line and exit 2 anywhere; with a device it times and
// checks every tree (exit 0), without one (CI) it fails with one line naming itself.
TEST_F(CanopyBench, build_benchmark_options_and_no_device) {
  expect_bad_input({"build", "--plummer", "0"}, "--plummer");
  expect_bad_input({"build", "--plummer", "16X"}, "--plummer");
  expect_bad_input({"build", "--depths", "9"}, "--depths");
  expect_bad_input({"--depths", "3", "build"}, "not of canopy bench build");
  const auto b = run({"bench", "build", "--depths", "2", "--plummer", "1000", "--reps", "2", "--host-reps", "1"});
  if (b.exit_code == 0) EXPECT_NE(b.out.find("pipeline, e2e"), std::string::npos) << b.out;
  else EXPECT_NE(b.err.find("bench build"), std::string::npos) << b.err;
}

TEST_F(CanopyBench, bad_input_is_one_line_and_exit_2) {
  expect_bad_input({"--depths", "8-1"}, "--depths");
  expect_bad_input({"--depths", "x"}, "--depths");
  expect_bad_input({"--depths", "11"}, "2^31 - 1 points");
  expect_bad_input({"--modes", "bogus"}, "--modes");
  expect_bad_input({"--json", (dir_ / "no/such/dir/r.json").string()}, "directory does not exist");
  expect_bad_input({"--dist", "lattice", "-n", "5"}, "--depths");
  expect_bad_input({"--dist", "plummer"}, "-n");
  expect_bad_input({"--input", (dir_ / "missing.bin").string()}, "no such file");
  expect_bad_input({"--dist", "plummer", "-n", "100", "--depths", "3"}, "--depths");
  expect_bad_input({"--backend", "cpu", "--modes", "mutex", "--inject-wrong-result", "lockfree"}, "--inject-wrong-result");
  expect_no_leftovers();
}

TEST_F(CanopyBench, plot_with_matplotlib) {
  if (run_program({"/usr/bin/python3", "-c", "import matplotlib"}).exit_code != 0)
    GTEST_SKIP() << "/usr/bin/python3 with matplotlib is not available";
  const auto r = run({"bench", "--backend", "cpu", "--depths", "1-2", "--reps", "3", "--modes", "continuation,reference",
                      "--plot", path("p").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_GT(fs::file_size(path("p.png")), 0u) << r.err;
  EXPECT_GT(fs::file_size(path("p.svg")), 0u) << r.err;
  expect_no_leftovers();
}

}  // namespace
