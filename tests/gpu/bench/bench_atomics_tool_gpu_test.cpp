// SPDX-License-Identifier: Apache-2.0
// `canopy bench atomics --sizes 1M --reps 3` on the GPU (label gpu; skipped without a device): exit 0,
// every result row of the table and of the JSON says ok, and the CSV has a row for each.
#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpu_test.hpp"
#include "run_tool.hpp"

namespace {

namespace fs = std::filesystem;
using canopy::test::slurp;

// run() finds canopy through CANOPY_TOOL when set (tools/gpu-check sets it: on the GPU machine the
// binaries sit in a copy of the tree at another path), else at the build tree's path.
class BenchAtomicsGpu : public canopy::test::tool_test {
 protected:
  BenchAtomicsGpu() : tool_test("canopy_bench_atomics_gpu_test") {}
};

TEST_F(BenchAtomicsGpu, every_variant_at_1M_validates) {
  CANOPY_SKIP_WITHOUT_GPU();
  const fs::path json = path("lab.json"), csv = path("lab.csv");
  const auto tool = run({"bench", "atomics", "--sizes", "1M", "--reps", "3", "--json", json.string(), "--csv", csv.string()});
  const std::string& stdout_text = tool.out;
  ASSERT_EQ(tool.signal, 0) << tool.err;
  ASSERT_EQ(tool.exit_code, 0) << stdout_text << tool.err;

  // The JSON: every experiment and variant ran at 1M and validated.
  const auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["schema"], "canopy-bench-results/1");
  EXPECT_EQ(j["benchmark"], "atomics_lab");
  std::vector<std::string> seen;
  for (const auto& r : j["results"]) {
    EXPECT_EQ(r["status"], "ok") << r.dump();
    EXPECT_EQ(r["size"], 1 << 20);
    EXPECT_GT(r["gelem_per_s"].get<double>(), 0) << r.dump();
    seen.push_back(r["experiment"].get<std::string>() + "/" + r["variant"].get<std::string>());
  }
  for (const char* want : {"containers/naive", "containers/warp_aggregated", "max/hierarchical_max",
                           "filter/cub_select_if", "histogram/cub_histogram_even", "copy/int4", "copy/cudaMemcpy"})
    EXPECT_NE(std::find(seen.begin(), seen.end(), want), seen.end()) << want << " did not run";
  EXPECT_GE(seen.size(), 23u);

  // The table on stdout: between the dashes and the "(* = naive" line, one row per result, each
  // ending in its status; every one says ok.
  std::istringstream table(stdout_text);
  bool in_rows = false;
  std::size_t rows = 0;
  for (std::string line; std::getline(table, line);) {
    if (line.rfind("---", 0) == 0) {
      in_rows = true;
      continue;
    }
    if (!in_rows) continue;
    if (line.rfind("(*", 0) == 0) break;
    ++rows;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    EXPECT_TRUE(line.size() >= 2 && line.compare(line.size() - 2, 2, "ok") == 0) << "row not ok: " << line;
  }
  EXPECT_EQ(rows, seen.size()) << stdout_text;
  // The CSV: a header and one line per result.
  std::istringstream lines(slurp(csv));
  std::size_t n = 0;
  for (std::string line; std::getline(lines, line);) ++n;
  EXPECT_GE(n, 1 + seen.size());
}

}  // namespace
