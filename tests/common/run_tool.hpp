// SPDX-License-Identifier: Apache-2.0
// Running a program as a user would, for the tests that spawn the `canopy` binary (header-only;
// needs GoogleTest and POSIX). No shell, no PATH search, no quoting issues: argv goes straight to
// posix_spawn, stdout and stderr are captured through files in a directory of the test's.
//
//  * canopy::test::run_process(args, dir, extra_env): runs args[0] with args, the environment plus
//    `extra_env`; adds no test failure of its own (a program that cannot start exits -1).
//  * canopy::test::run_tool(args, dir, extra_env): the same for the canopy binary (canopy_tool_path()),
//    where failing to start it is a test failure.
//  * canopy::test::tool_test: a fixture with a fresh directory per test, run()/run_program() and
//    the checks the tool tests share (expect_usage_error, expect_no_leftovers).
//  * canopy::test::slurp(path), lines_of(text).
//
//   class CanopyFoo : public canopy::test::tool_test {
//    protected:
//     CanopyFoo() : tool_test("canopy_foo_test") {}
//   };
//   TEST_F(CanopyFoo, help) { const auto r = run({"foo", "--help"}); EXPECT_EQ(r.exit_code, 0) << r.err; }
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

extern char** environ;

namespace canopy::test {

/// A whole file's bytes ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// `text` split at '\n' (no empty last line for a trailing newline).
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// What a spawned program did.
struct tool_run {
  int exit_code = -1;  ///< its exit status; 128 + N when signal N ended it; -1 when it did not start
  int signal = 0;      ///< the signal that ended it, 0 when it exited (or did not start)
  std::string out, err;
  std::vector<std::string> err_lines() const { return lines_of(err); }
};

/// Runs args[0] (a path) with `args`; its environment is ours plus `extra_env` ("NAME=value", each
/// replacing a NAME we have). stdout and stderr go to dir/stdout.txt and dir/stderr.txt (replaced on
/// every run) and come back in out and err. Adds no test failure: a program that cannot be started
/// gives exit_code -1 and the reason in err.
inline tool_run run_process(std::vector<std::string> args, const std::filesystem::path& dir,
                            std::vector<std::string> extra_env = {}) {
  tool_run r;
  if (args.empty()) {
    r.err = "run_process: no program";
    return r;
  }
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto overridden = [&](const char* entry) {
    for (const auto& e : extra_env) {
      const auto eq = e.find('=');
      const auto name = eq == std::string::npos ? e + "=" : e.substr(0, eq + 1);  // "NAME="
      if (std::strncmp(entry, name.c_str(), name.size()) == 0) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e)
    if (!overridden(*e)) envp.push_back(*e);
  for (auto& e : extra_env) envp.push_back(e.data());
  envp.push_back(nullptr);

  const auto out = dir / "stdout.txt", err = dir / "stderr.txt";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    r.err = "cannot spawn " + args[0] + ": " + std::strerror(rc);
    return r;
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else {
    r.signal = WTERMSIG(status);
    r.exit_code = 128 + r.signal;
  }
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

#ifdef CANOPY_TOOL_PATH
/// The canopy binary: $CANOPY_TOOL when set and not empty (tools/gpu-check sets it: on the GPU
/// machine the binaries sit in a copy of the tree at another path), else the build tree's
/// CANOPY_TOOL_PATH (a compile definition of each test target that spawns it).
inline std::string canopy_tool_path() {
  const char* tool = std::getenv("CANOPY_TOOL");
  return tool != nullptr && *tool != '\0' ? tool : CANOPY_TOOL_PATH;
}

/// Runs canopy with `args` (without the program's name), as run_process does; a canopy that
/// cannot be started is a test failure.
inline tool_run run_tool(std::vector<std::string> args, const std::filesystem::path& dir,
                         std::vector<std::string> extra_env = {}) {
  args.insert(args.begin(), canopy_tool_path());
  auto r = run_process(std::move(args), dir, std::move(extra_env));
  if (r.exit_code == -1) ADD_FAILURE() << r.err;
  return r;
}
#endif

/// A fixture with a fresh directory per test, <tmp>/<prefix>.<pid>.<test name>: removed after a
/// test that passed, kept for a look after one that failed.
class tool_test : public ::testing::Test {
 protected:
  explicit tool_test(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() / (prefix_ + "." + std::to_string(::getpid()) + "." + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  std::filesystem::path path(const std::string& name) const { return dir_ / name; }

#ifdef CANOPY_TOOL_PATH
  /// canopy with `args`, its output captured in this test's directory.
  tool_run run(std::vector<std::string> args, std::vector<std::string> extra_env = {}) const {
    return run_tool(std::move(args), dir_, std::move(extra_env));
  }

  /// Bad input: exit 2, no stdout, stderr's first line "canopy: error: ..." mentioning `mentions`;
  /// with `only_line`, nothing else on stderr.
  void expect_usage_error(const std::vector<std::string>& args, const std::string& mentions, bool only_line) const {
    const auto r = run(args);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    const auto lines = r.err_lines();
    if (only_line) {
      ASSERT_EQ(lines.size(), 1u) << r.err;
    } else {
      ASSERT_GE(lines.size(), 1u) << r.err;
    }
    EXPECT_EQ(lines[0].rfind("canopy: error: ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find(mentions), std::string::npos) << lines[0] << " should mention " << mentions;
    EXPECT_EQ(r.out, "");
  }
#endif
  /// Any program (args[0], a path), its output captured in this test's directory.
  tool_run run_program(std::vector<std::string> args, std::vector<std::string> extra_env = {}) const {
    return run_process(std::move(args), dir_, std::move(extra_env));
  }

  /// No temporary or partial file (a name with ".canopy-incomplete." or ".tmp", the name
  /// canopy::trees::write_file_atomically gives its temporaries and the old one) left behind in
  /// this test's directory.
  void expect_no_leftovers() const {
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      EXPECT_EQ(e.path().filename().string().find(".canopy-incomplete."), std::string::npos) << e.path();
      EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
    }
  }

  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

}  // namespace canopy::test
