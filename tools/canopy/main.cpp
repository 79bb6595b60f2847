// SPDX-License-Identifier: Apache-2.0
// `canopy`: generate and convert point sets, build octrees, run and validate the upward pass, export task graphs.
//
// Output contract: results on stdout; progress (one line per finished stage) and warnings on
// stderr through spdlog; a failure prints exactly one line "canopy: error: <what>: <problem>" on
// stderr (plus a --help hint for a bad command line) and exits with exit_code (common.hpp).
#include <cerrno>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "canopy/status.hpp"
#include "canopy/version.hpp"
#include "canopy/trees/errors.hpp"
#include "canopy/trees/threads.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "mpi_launch.hpp"
#if CANOPY_HAVE_DISTRIBUTED
#include "canopy/distributed/mpi_context.hpp"
#endif

namespace {

using namespace canopy::tool;

// The error line, with every control byte (a newline or an escape in a file name or an argument)
// written as \xNN: one line on stderr whatever was echoed, nothing the terminal would act on, and no
// NUL to cut it. Readers quote what they echo themselves (trees::quoted_bytes); this is the net.
int fail(int code, const std::string& message) {
  // Under mpiexec, a failure every rank reached alike (a bad command line, an agreed distributed
  // error) is said once, by rank 0.
  if (mpi_launch::launched() && (mpi_launch::active() ? mpi_launch::rank() : mpi_launch::launched_rank()) != 0) return code;
  std::string line = "canopy: error: ";
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 32 || u == 127)
      line += fmt::format("\\x{:02x}", u);
    else
      line += c;
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
  return code;
}

// The full command name ("canopy validate") of the deepest subcommand that was being parsed.
std::string command_path(const CLI::App& app) {
  std::string path = app.get_name();
  const CLI::App* at = &app;
  for (;;) {
    const auto subs = at->get_subcommands();
    if (subs.empty()) return path;
    at = subs.front();
    path += " " + at->get_name();
  }
}

// The exit code of a failed file operation (README "Errors and exit codes"): the machine ran out of
// something (disk space, quota, memory, file descriptors) or the device failed: 3, the run failed;
// anything else (no such folder, permission denied, a name too long, a folder in the way) is what
// the user gave: 2. A full disk used to exit 2, "bad input".
int exit_code_of(const std::error_code& ec) {
  switch (ec.value()) {
    case ENOSPC: case EDQUOT: case EIO: case ENOMEM: case EMFILE: case ENFILE: case EFBIG:
      return ec.category() == std::system_category() || ec.category() == std::generic_category() ? exit_failed
                                                                                                  : exit_bad_input;
    default: return exit_bad_input;
  }
}

// The first argument that is not an option (an empty one included), if any.
std::optional<std::string> first_word(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a.empty() || a[0] != '-') return a;
  return std::nullopt;
}

// Under mpiexec a failure on one rank only (outside the distributed pipeline's agreed phases):
// that rank says it, naming itself, and ends every rank, which may be waiting for it.
int fail_on_this_rank(int code, const std::string& message) {
  if (!mpi_launch::active() || mpi_launch::size() == 1) return fail(code, message);
  const std::string line = fmt::format("canopy: error: rank {}: {}\n", mpi_launch::rank(), message);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  mpi_launch::abort_all(code);
}

// The commands that run across the ranks under mpiexec; the others run on one process.
bool runs_distributed(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    const std::string& name = sub->get_name();
    if (name == "accumulate" || name == "validate") return true;
    if (name == "bench") return sub->get_subcommands().empty();  // not bench atomics, bench build
  }
  return false;
}

void set_up_logging(const std::string& level) {
  // Unbuffered stderr, no colour codes: the lines are read by people and by tests alike.
  auto logger = spdlog::stderr_logger_st("canopy");
  logger->set_pattern("canopy: %l: %v");
  // Under mpiexec rank 0 reports progress; the other ranks' lines would only repeat it.
  const bool quiet_rank = mpi_launch::active() && mpi_launch::rank() != 0;
  logger->set_level(quiet_rank ? spdlog::level::off : spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

}  // namespace

int main(int argc, char** argv) {
  reserve_standard_streams();  // before anything opens a file
  const mpi_launch mpi(argc, argv);  // MPI initialised only under mpiexec (mpi_launch.hpp)
  CLI::App app{
      "Canopy: GPU task scheduling for dependency-tree accumulation.\n"
      "Generate point sets, build octrees, run the upward pass on a backend and check it against\n"
      "the double-precision CPU reference.",
      "canopy"};
  app.footer(
      "Exit codes: 0 done (validate: within tolerance), 1 validate: out of tolerance or counts differ,\n"
      "            2 bad input or bad command line, 3 the run failed (timeout, backend error, out of\n"
      "            memory or disk space, ...).\n"
      "Run 'canopy COMMAND --help' for a command's options.");
  app.require_subcommand(1);
  // "canopy 0.12.0 (git 60b4ef7)": the version of the headers and the revision canopy::runtime
  // was built from ("unknown" outside a git checkout).
  app.set_version_flag("--version", fmt::format("canopy {} (git {})", canopy::version_string, canopy::git_revision()));
  app.fallthrough();  // global options are accepted after the subcommand too

  std::string log_level = "info";
  app.add_option("--log-level", log_level, "progress and diagnostics on stderr")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->envname("CANOPY_LOG_LEVEL")
      ->capture_default_str();
  unsigned host_threads = 0;
  app.add_option("--host-threads", host_threads, "threads for generating and building on the host (0 = all cores)")
      ->envname("CANOPY_HOST_THREADS")
      ->capture_default_str();

  std::vector<command> commands = {add_gen_command(app), add_build_command(app), add_accumulate_command(app),
                                   add_validate_command(app), add_dot_command(app), add_convert_command(app),
                                   add_run_dag_command(app), add_bench_command(app), add_modes_command(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {  // --help, --version
      // Through a string: CLI11 ends --version with std::endl, whose flush failed unseen (on
      // /dev/full the line said "Input/output error", not why); written here, the flush below
      // meets the failure and its errno.
      std::ostringstream text;
      const int code = app.exit(e, text, std::cerr);
      std::fwrite(text.str().data(), 1, text.str().size(), stdout);
      return check_standard_output(code);
    }
    // `canopy nosuch`: CLI11 says only "A subcommand is required"; name the word and the commands.
    const auto unknown = app.get_subcommands().empty() ? first_word(app.remaining()) : std::nullopt;
    if (unknown) {
      std::string names;
      for (const auto& c : commands) names += (names.empty() ? "" : ", ") + c.first->get_name();
      fail(exit_bad_input, fmt::format("{}: unknown command (commands: {})", canopy::trees::quoted_bytes(*unknown), names));
    } else {
      fail(exit_bad_input, e.what());
    }
    if (!mpi_launch::launched() || mpi_launch::launched_rank() == 0)
      std::fputs(fmt::format("Run '{} --help' for more information.\n", command_path(app)).c_str(), stderr);
    return exit_bad_input;
  }

  if (mpi_launch::launched_size() > 1 && !runs_distributed(app))
    return fail(exit_bad_input, fmt::format("{}: runs on one process; only accumulate, validate and bench run across the "
                                            "ranks of mpiexec (start it without mpiexec, or with -n 1)",
                                            command_path(app)));
  if (mpi_launch::launched() && !mpi_launch::active() && runs_distributed(app))
    return fail(exit_bad_input, fmt::format("{}: this canopy was built without MPI, so it cannot run across the ranks of "
                                            "mpiexec (tools/setup installs Open MPI; rebuild, or run it without mpiexec)",
                                            command_path(app)));

  set_up_logging(log_level);
  remove_temporaries_on_signals();
  canopy::trees::set_host_threads(host_threads);

  try {
    for (auto& [subcommand, run] : commands)
      if (subcommand->parsed()) return check_standard_output(run());
    return fail(exit_bad_input, "no command given");
#if CANOPY_HAVE_DISTRIBUTED
  } catch (const canopy::distributed::distributed_error& e) {
    // Every rank has it (agreed); rank 0 says it. A phase that reads or checks what the user gave
    // failed on bad input; any other, in the run.
    const bool input = e.phase() == "read" || e.phase() == "options" || e.phase() == "backend";
    return fail(input ? exit_bad_input : exit_failed, e.what());
#endif
  } catch (const usage_error& e) {
    return fail_on_this_rank(exit_bad_input, e.what());
  } catch (const canopy::trees::input_error& e) {
    return fail_on_this_rank(exit_bad_input, e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    // I/O failures of the writers; name the file first, like every other message.
    return fail_on_this_rank(exit_code_of(e.code()), fmt::format("{}: {}", e.path1().string(), e.code().message()));
  } catch (const canopy::error& e) {
    return fail_on_this_rank(e.code() == canopy::status::invalid_argument ? exit_bad_input : exit_failed, e.what());
  } catch (const std::invalid_argument& e) {
    return fail_on_this_rank(exit_bad_input, e.what());
  } catch (const std::bad_alloc&) {
    return fail_on_this_rank(exit_failed, "out of memory");
  } catch (const std::exception& e) {
    return fail_on_this_rank(exit_failed, e.what());
  }
}
