// `canopy run-dag` as a user runs it: a spawned process, its exit code, stdout and stderr.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

extern char** environ;

namespace {

namespace fs = std::filesystem;

struct tool_run {
  int exit_code = -1;
  std::string out, err;
};

class RunDag : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("canopy_run_dag_test." + std::to_string(::getpid()) + "." + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return dir_ / name;
  }

  static std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  tool_run run(std::vector<std::string> args) const {
    args.insert(args.begin(), CANOPY_TOOL_PATH);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const auto out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = 0;
    tool_run r;
    const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      ADD_FAILURE() << "cannot spawn " << argv[0];
      return r;
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
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

  fs::path dir_;
};

TEST_F(RunDag, ExampleDiamondPassesOnEveryBackend) {
  for (const char* backend : {"reference", "cpu", "auto"}) {
    const auto r = run({"run-dag", CANOPY_EXAMPLE_DAG, "--backend", backend, "--blocks", "2"});
    EXPECT_EQ(r.exit_code, 0) << backend << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("tasks     29 (66 edges, 1 sources, 1 sinks)"), std::string::npos) << r.out;
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
