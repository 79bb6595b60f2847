// SPDX-License-Identifier: Apache-2.0
// Pieces every `canopy` subcommand shares: exit codes, loading points and trees (from a file or a
// generator spec), stage timing for progress lines, and writing output files atomically.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "canopy/trees/octree.hpp"
#include "common/text.hpp"
#include "canopy/trees/point.hpp"

namespace CLI {
class App;
}

namespace canopy::tool {

/// Exit codes of every subcommand.
enum exit_code : int {
  exit_ok = 0,         ///< done (validate: within tolerance)
  exit_mismatch = 1,   ///< validate: counts differ or an error is past the tolerance
  exit_bad_input = 2,  ///< bad file, bad option or bad value; one line on stderr
  exit_failed = 3,     ///< the run itself failed (backend error, timeout, queue overflow, out of memory)
};

/// Something wrong with what the user gave us (not with the program): one line, exit 2.
/// what() is "<subject>: <problem>", like canopy::trees::input_error.
class usage_error : public std::runtime_error {
 public:
  usage_error(const std::string& subject, const std::string& problem)
      : std::runtime_error(subject + ": " + problem) {}
};

/// Which particles of a snapshot to read (`--family gas|dark|star|all` for Tipsy, `--type N|all`
/// for Gadget). Given for any other input, they are an error rather than ignored.
struct point_options {
  std::string family = "all";
  std::string type = "all";
};
void add_point_options(CLI::App& command, point_options& options);

/// `--seed` into `seed`: an integer in [0, 2^64 - 1], refused as the `gen:` spec's SEED is (no
/// wrapping of -1, no saturating of 2^64 or more, no trailing characters).
void add_seed_option(CLI::App& command, std::uint64_t& seed, const std::string& help);

/// How trees are built from points (`--max-leaf`, `--max-depth`), and how the points are read
/// (add_tree_options adds the point_options too, so every command that reads points has them).
struct tree_options {
  int max_leaf = 32;
  int max_depth = 21;
  point_options points;
};
void add_tree_options(CLI::App& command, tree_options& options);

/// The help text for a FILE argument (a points file or a generator spec).
extern const char* const input_help;

/// Reads points from FILE, in whichever format its content shows (Canopy binary or CSV, Tipsy,
/// Gadget, PLY, .npy: canopy::trees::read_points) or, when `spec` starts with "gen:", generates
/// them: `gen:DIST:N[:SEED]` or `gen:lattice:DEPTH:PER_LEAF[:SEED]`.
std::vector<canopy::trees::point> load_points(const std::string& spec, const point_options& options = {});

/// Part `part` of `parts` of the points `spec` names, for one rank of a distributed run, made or
/// read without the others': a generator spec's slice (trees::generate_slice: the points
/// [n * part / parts, n * (part + 1) / parts) of the whole spec's), or a Canopy binary file's
/// records of that range (one seek). std::nullopt for a file of another format, which the caller
/// reads whole on one rank (load_points) and scatters; a lattice spec (a complete octree built in
/// place) is a usage_error.
std::optional<std::vector<canopy::trees::point>> load_points_part(const std::string& spec, const point_options& options,
                                                                  std::size_t part, std::size_t parts);

/// load_points + build_octree, with a progress line per stage. A lattice spec builds the complete
/// octree directly (build_complete_octree, points generated in place), ignoring `options`.
struct loaded_tree {
  canopy::trees::octree tree;
  double load_ms = 0;     ///< reading or generating the points
  double build_ms = 0;    ///< building the octree (for a lattice spec: generating it in place)
  bool complete = false;  ///< built by build_complete_octree
};
loaded_tree load_tree(const std::string& spec, const tree_options& options);

/// Times one stage of work and logs it at info level when it ends ("built octree: ... (12.3 ms)").
/// Only completed stages are logged, so a failing command prints nothing but its error line.
class stage {
 public:
  stage() : start_(std::chrono::steady_clock::now()) {}
  double elapsed_ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  }
  void done(const std::string& what) const;

 private:
  std::chrono::steady_clock::time_point start_;
};

/// Throws usage_error(subject, ...) when `path` cannot be an output file: its folder does not exist,
/// or it is a folder. Checked before a long run, not after.
void check_output_path(const std::string& subject, const std::filesystem::path& path);

/// Throws usage_error when two of `outputs` (subject, path; an empty path is not given) would write
/// the same file: the same name, another spelling of it, or a link to it (`--json r --csv r` kept
/// only the CSV). A character device may take several.
void check_distinct_outputs(const std::vector<std::pair<std::string, std::filesystem::path>>& outputs);

/// Writes `path` through a temporary file in the same directory and a rename
/// (canopy::trees::write_file_atomically), so a failure leaves either the old file or none, never
/// half of a new one; a missing directory or a directory in the way is a usage_error.
void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);

/// Where a command's summary line ("wrote ... to FILE") goes: stdout, or stderr when FILE is the
/// same file or pipe as stdout (`-o /dev/stdout`), so that the summary does not end up inside the
/// output. Call after the file is written.
std::FILE* summary_stream(const std::filesystem::path& output);

/// SIGINT, SIGTERM and SIGHUP remove the temporary file of an output being written
/// (canopy::trees::remove_temporary_files), then end the process by the same signal. A signal the
/// shell ignores (nohup, a background job's SIGINT) stays ignored.
void remove_temporaries_on_signals();

/// Opens read-only /dev/null on a closed descriptor 0, 1 or 2, so that no output file is opened on
/// it and a write to a closed stdout still fails (EBADF). Call first in main.
void reserve_standard_streams();

/// Flushes stdout (std::cout and the C stream); false when this or an earlier write to it failed.
/// The reason of the first failed flush is kept for check_standard_output's line.
bool flush_standard_output();

/// Flushes stdout: when anything written to it failed (a full disk, /dev/full, a closed stdout),
/// prints one line "canopy: error: standard output: <reason>" and returns exit_failed; else `code`.
int check_standard_output(int code);

/// 1234567 -> "1,234,567" (counts in human-readable output).
using canopy::bench::grouped;

}  // namespace canopy::tool
