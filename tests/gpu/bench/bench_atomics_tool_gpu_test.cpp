// `canopy bench atomics --sizes 1M --reps 3` on the GPU (label gpu; skipped without a device): exit 0,
// every result row of the table and of the JSON says ok, and the CSV has a row for each.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "gpu_test.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(BenchAtomicsGpu, every_variant_at_1M_validates) {
  CANOPY_SKIP_WITHOUT_GPU();
  const fs::path dir = fs::temp_directory_path() / ("canopy_bench_atomics_gpu_test." + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path json = dir / "lab.json", csv = dir / "lab.csv", out = dir / "out.txt", err = dir / "err.txt";
  // CANOPY_TOOL overrides the build-tree path (tools/gpu-check sets it: on the GPU machine the
  // binaries sit in a copy of the tree at another path).
  const char* tool = std::getenv("CANOPY_TOOL");
  std::vector<std::string> args = {tool != nullptr && *tool != '\0' ? tool : CANOPY_TOOL_PATH, "bench", "atomics", "--sizes", "1M", "--reps", "3",
                                   "--json", json.string(), "--csv", csv.string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const std::string stdout_text = slurp(out), stderr_text = slurp(err);
  ASSERT_TRUE(WIFEXITED(status)) << stderr_text;
  ASSERT_EQ(WEXITSTATUS(status), 0) << stdout_text << stderr_text;

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
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
