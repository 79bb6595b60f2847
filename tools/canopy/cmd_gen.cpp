// SPDX-License-Identifier: Apache-2.0
// canopy gen: write a seeded point set.
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "canopy/trees/generators.hpp"
#include "canopy/trees/point_io.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace canopy::tool {

namespace {

struct gen_options {
  std::string dist;
  std::int64_t n = -1;
  std::uint64_t seed = 1;
  int depth = -1;
  int per_leaf = -1;
  int clusters = 16;
  std::string output;
};

int run_gen(const gen_options& o, const CLI::App& cmd) {
  namespace trees = canopy::trees;
  const auto dist = trees::parse_distribution(o.dist);
  const bool lattice = dist == trees::distribution::lattice;
  const auto given = [&](const char* name) { return cmd.count(name) > 0; };
  if (lattice) {
    if (given("-n")) throw usage_error("-n", "does not apply to --dist lattice (it has 8^depth * per-leaf points)");
    if (!given("--depth") || !given("--per-leaf"))
      throw usage_error("--dist lattice", "needs --depth D and --per-leaf P");
  } else {
    if (!given("-n")) throw usage_error("--dist " + o.dist, "needs -n N");
    if (given("--depth") || given("--per-leaf"))
      throw usage_error("--depth/--per-leaf", "apply only to --dist lattice");
  }
  if (given("--clusters") && dist != trees::distribution::clusters)
    throw usage_error("--clusters", "applies only to --dist clusters");

  // Fail before generating tens of millions of points, not after.
  const std::filesystem::path out = o.output;
  check_output_path(o.output, out);

  stage gen;
  std::vector<trees::point> points;
  switch (dist) {
    case trees::distribution::uniform: points = trees::generate_uniform(static_cast<std::size_t>(o.n), o.seed); break;
    case trees::distribution::plummer: points = trees::generate_plummer(static_cast<std::size_t>(o.n), o.seed); break;
    case trees::distribution::clusters:
      points = trees::generate_clusters(static_cast<std::size_t>(o.n), o.seed, o.clusters);
      break;
    case trees::distribution::lattice: points = trees::generate_lattice(o.depth, o.per_leaf, o.seed); break;
  }
  gen.done(fmt::format("generated {} {} points", grouped(static_cast<long long>(points.size())), trees::to_string(dist)));

  stage write;
  trees::write_points(out, points);  // temporary file + rename: never half-written
  write.done(fmt::format("wrote {}", o.output));

  // A device or FIFO written in place has no size to report.
  std::error_code ec;
  const auto bytes = std::filesystem::is_regular_file(out, ec) ? std::filesystem::file_size(out, ec) : 0;
  fmt::print(summary_stream(out), "wrote {} points ({}, seed {}) to {} ({}{})\n",
             grouped(static_cast<long long>(points.size())), trees::to_string(dist), o.seed, o.output,
             trees::format_of(out) == trees::point_format::csv ? "CSV" : "binary",
             ec || bytes == 0 ? "" : ", " + grouped(static_cast<long long>(bytes)) + " bytes");
  return exit_ok;
}

}  // namespace

command add_gen_command(CLI::App& app) {
  auto o = std::make_shared<gen_options>();
  auto* cmd = app.add_subcommand("gen", "Generate a seeded point set and write it (.csv as CSV, else binary)");
  cmd->add_option("--dist", o->dist, "uniform (unit cube), plummer (sphere of scale radius 1), clusters "
                                     "(Gaussian blobs) or lattice (a complete octree's points)")
      ->required();
  cmd->add_option("-n,--count", o->n, "number of points (suffixes k, M, G are powers of 1000: 16M)")
      ->transform(CLI::AsSizeValue(true))
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{std::numeric_limits<std::int32_t>::max()}));
  add_seed_option(*cmd, o->seed, "the same seed gives the same points on every machine");
  cmd->add_option("--depth", o->depth, "lattice: depth of the complete octree")->check(CLI::Range(0, 21));
  cmd->add_option("--per-leaf", o->per_leaf, "lattice: points in each finest cell")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  cmd->add_option("--clusters", o->clusters, "clusters: number of Gaussian blobs")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("-o,--output", o->output, "output file; written to a temporary name, then renamed")->required();
  cmd->footer("Examples:\n  canopy gen --dist plummer -n 1M --seed 1 -o plummer.bin\n"
              "  canopy gen --dist lattice --depth 5 --per-leaf 8 -o lattice.csv");
  return {cmd, [o, cmd] { return run_gen(*o, *cmd); }};
}

}  // namespace canopy::tool
