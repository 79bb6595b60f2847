// SPDX-License-Identifier: Apache-2.0
// canopy convert: read points in any format the tool reads and write them as Canopy binary or CSV.
#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "canopy/trees/point_io.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace canopy::tool {

namespace {

struct convert_options {
  std::string input;
  std::string output;
  point_options points;
};

int run_convert(const convert_options& o) {
  namespace trees = canopy::trees;
  // Fail before reading a large snapshot, not after.
  check_output_path(o.output, o.output);
  const auto points = load_points(o.input, o.points);
  stage write;
  trees::write_points(o.output, points);  // temporary file + rename: never half-written
  write.done(fmt::format("wrote {}", o.output));
  const bool generated = o.input.starts_with("gen:");
  fmt::print(summary_stream(o.output), "converted {} points from {} ({}) to {} ({})\n",
             grouped(static_cast<long long>(points.size())), o.input,
             generated ? "generated" : trees::to_string(trees::detect_point_format(o.input)), o.output,
             trees::format_of(o.output) == trees::point_format::csv ? "CSV" : "binary");
  return exit_ok;
}

}  // namespace

command add_convert_command(CLI::App& app) {
  auto o = std::make_shared<convert_options>();
  auto* cmd = app.add_subcommand("convert", "Convert a points file (Tipsy, Gadget, PLY, .npy, CSV or Canopy binary) "
                                            "to Canopy binary, or CSV when OUT ends in .csv");
  cmd->add_option("IN", o->input, input_help)->required();
  cmd->add_option("OUT", o->output, "output file: CSV for .csv, Canopy binary for any other name; written to a "
                                    "temporary name, then renamed")
      ->required();
  add_point_options(*cmd, o->points);
  cmd->footer("Examples:\n  canopy convert snapshot_010 halo.pts --type 1\n  canopy convert run.tipsy gas.csv --family gas");
  return {cmd, [o] { return run_convert(*o); }};
}

}  // namespace canopy::tool
