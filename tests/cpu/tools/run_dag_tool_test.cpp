// SPDX-License-Identifier: Apache-2.0
// `canopy run-dag` as a user runs it: a spawned process, its exit code, stdout and stderr.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_tool.hpp"

namespace {

namespace fs = std::filesystem;

class RunDag : public canopy::test::tool_test {
 protected:
  RunDag() : tool_test("canopy_run_dag_test") {}

  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return dir_ / name;
  }

  // Bad input: exit 2, one line "canopy: error: ..." on stderr mentioning `mentions`, no stdout.
  void expect_bad_input(const std::vector<std::string>& args, const std::string& mentions) const {
    const auto r = run(args);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(r.err.rfind("canopy: error: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line:\n" << r.err;
    EXPECT_NE(r.err.find(mentions), std::string::npos) << r.err << " should mention " << mentions;
    EXPECT_EQ(r.out, "");
  }
};

TEST_F(RunDag, ExampleDiamondPassesOnEveryBackend) {
  for (const char* backend : {"reference", "cpu", "auto"}) {
    const auto r = run({"run-dag", CANOPY_EXAMPLE_DAG, "--backend", backend, "--blocks", "2"});
    EXPECT_EQ(r.exit_code, 0) << backend << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("tasks     29 (66 edges, 1 source, 1 sink)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("result    PASS"), std::string::npos) << r.out;
  }
}

TEST_F(RunDag, EveryModeOnTheCpuBackend) {
  for (const char* mode : {"mutex", "fixed-queue", "private-queues", "all-threads", "lockfree-tree", "shared-queues",
                           "lockfree", "continuation"}) {
    const auto r = run({"run-dag", CANOPY_EXAMPLE_DAG, "--backend", "cpu", "--mode", mode, "--json"});
    ASSERT_EQ(r.exit_code, 0) << mode << "\n" << r.out << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["result"], "PASS");
    EXPECT_EQ(j["tasks"], 29);
    EXPECT_EQ(j["edges"], 66);
    EXPECT_EQ(j["mismatches"], 0);
  }
}

TEST_F(RunDag, EmptyAndSingleTaskGraphs) {
  auto r = run({"run-dag", write("empty.dot", "digraph {}"), "--backend", "cpu"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tasks     0 (0 edges, 0 sources, 0 sinks)"), std::string::npos) << r.out;
  r = run({"run-dag", write("one.dot", "digraph { only [weight=41] }"), "--backend", "cpu", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["result"], "PASS");
}

TEST_F(RunDag, BadInputIsOneLineAndExitTwo) {
  expect_bad_input({"run-dag", write("bad.dot", "digraph { a -> ")}, "malformed DOT");
  expect_bad_input({"run-dag", write("cycle.dot", "digraph { a -> b; b -> c; c -> a }")}, "cycle a -> b -> c -> a");
  expect_bad_input({"run-dag", write("loop.dot", "digraph { a -> a }")}, "cycle a -> a");
  expect_bad_input({"run-dag", write("undirected.dot", "graph { a -- b }")}, "digraph");
  expect_bad_input({"run-dag", write("weight.dot", "digraph { a [weight=heavy] }")}, "weight 'heavy'");
  expect_bad_input({"run-dag", (dir_ / "missing.dot").string()}, "missing.dot");
}

}  // namespace
