// SPDX-License-Identifier: Apache-2.0
// canopy-atomics-lab: the atomics lab as a command. Exit status: 0 all variants validated,
// 1 a wrong result or CUDA error, 2 bad options, 77 no CUDA device.
#include <CLI/CLI.hpp>

#include <iostream>

#include "atomics_lab.hpp"
#include "common/sizes.hpp"

int main(int argc, char** argv) {
  canopy::bench::atomics_lab_options options;
  CLI::App app{"Canopy atomics lab: the seeds' atomic-operation techniques side by side, each validated "
               "against a host result before its time counts"};
  std::string sizes = "1M,16M,64M";
  std::string experiments;
  app.add_option("--sizes", sizes, "element counts, comma-separated; K/M/G are binary (1M = 2^20)")
      ->capture_default_str();
  app.add_option("--experiments", experiments, "subset to run: containers,max,filter,histogram,copy (default: all)");
  app.add_option("--reps", options.reps, "timed runs per variant")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--warmup", options.warmup, "untimed runs first")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--json", options.json_path, "write results as JSON");
  app.add_option("--csv", options.csv_path, "write results as CSV");
  app.add_option("--plot", options.plot_path, "draw a plot there with --plot-command (JSON goes to --json or <plot>.json)");
  app.add_option("--plot-command", options.plot_command, "plot command; {json} and {plot} are replaced")
      ->capture_default_str();
  app.add_option("--device", options.device, "CUDA device ordinal")->capture_default_str();
  app.add_flag("--quiet", options.quiet, "print only the table");
  CLI11_PARSE(app, argc, argv);

  try {
    options.sizes = canopy::bench::parse_size_list(sizes);
  } catch (const std::exception& e) {
    std::cerr << "canopy-atomics-lab: --sizes: " << e.what() << "\n";
    return 2;
  }
  if (!experiments.empty()) {
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = experiments.find(',', start);
      options.experiments.push_back(experiments.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return canopy::bench::run_atomics_lab(options);
}
