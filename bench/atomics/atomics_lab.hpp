// SPDX-License-Identifier: Apache-2.0
// The atomics lab: the seeds' atomic-operation techniques measured side by side on the GPU, each
// variant validated against a host (naive) result before its time counts.
//
//   containers  seed 000: count containers whose float sum exceeds a limit
//   max         seed 002: global maximum of A*B/C+D over int arrays
//   filter      seeds 003/004: stream compaction (keep the positive elements)
//   histogram   a 256-bin histogram of bytes
//   copy        int / int2 / int4 copies against the measured device copy bandwidth
//
// Host-only header (no CUDA types); the experiments live in .cu files of the same library.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace canopy::bench {

struct atomics_lab_options {
  std::vector<std::uint64_t> sizes = {std::uint64_t{1} << 20, std::uint64_t{1} << 24, std::uint64_t{1} << 26};
  std::vector<std::string> experiments;  ///< empty: all (containers, max, filter, histogram, copy)
  int reps = 20;                         ///< timed runs per variant (median, min, max reported)
  int warmup = 3;                        ///< untimed runs first
  std::string json_path;                 ///< write results as JSON when non-empty
  std::string csv_path;                  ///< write results as CSV when non-empty
  std::string plot_path;                 ///< when non-empty, run plot_command to draw the JSON there
  /// Command run when plot_path is set; {json} and {plot} are replaced by the (quoted) paths. The
  /// JSON is written to json_path, or next to the plot as <plot_path>.json when json_path is empty.
  /// The default draws PNG and SVG with tools/plot/plot_atomics.py (run from the source tree).
  std::string plot_command = "/usr/bin/python3 tools/plot/plot_atomics.py {json} -o {plot}";
  int device = 0;
  bool quiet = false;                    ///< no progress lines, only the table
  /// Where progress lines go when set (`canopy bench atomics` sends them to its logger on stderr);
  /// unset: stdout. Not called under quiet.
  std::function<void(const std::string&)> progress;
};

/// All experiment names, in the order they run.
const std::vector<std::string>& atomics_lab_experiments();

/// Runs the lab; prints progress and the table to stdout. Returns 0 when every variant validated
/// (sizes that do not fit in device memory are skipped and reported, not failures), 1 when a
/// variant gave a wrong result or a CUDA error occurred, 2 for bad options, 77 when there is no
/// CUDA device (the CTest skip code).
int run_atomics_lab(const atomics_lab_options& options);

}  // namespace canopy::bench
