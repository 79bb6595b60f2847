// SPDX-License-Identifier: Apache-2.0
// canopy bench build: the host octree build against the GPU build and the task graphs built on the
// device, on the benchmark's complete trees and on Plummer spheres (build_bench.hpp does the work;
// this file is the command line and the table). Exit 0 done, 1 a GPU tree differed from the
// host's, 2 bad input, 3 no usable GPU or a CUDA failure.
#include <algorithm>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "build_bench.hpp"
#include "canopy/trees/generators.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "octree_bench.hpp"

namespace canopy::tool {
namespace {

namespace cb = canopy::bench;

struct build_bench_cli {
  std::string depths = "5,8";
  int per_leaf = 8;
  std::vector<std::string> plummer = {"1M", "16M"};
  int max_leaf = 32;
  int reps = 20;
  int host_reps = 3;
  std::string json;
};

/// "16M" -> 16000000: k, M, G are powers of 1000, like `canopy bench -n`.
std::int64_t parse_count(const std::string& text) {
  std::size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    throw usage_error("--plummer", "'" + text + "' is not a point count");
  }
  const std::string suffix = text.substr(used);
  const long long scale = suffix.empty() ? 1 : suffix == "k" ? 1000 : suffix == "M" ? 1000000 : suffix == "G" ? 1000000000 : 0;
  if (scale == 0 || v < 1 || v > 400'000'000 / scale)
    throw usage_error("--plummer", "'" + text + "': give 1 to 400M points (suffixes k, M, G)");
  return v * scale;
}

std::string fmt_summary(const cb::summary& s) { return fmt::format("{:.3f} ({:.3f}-{:.3f})", s.median, s.min, s.max); }

nlohmann::json to_json(const cb::summary& s) { return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"count", s.count}}; }

int run_build_bench_command(const build_bench_cli& o) {
  std::vector<int> depths;
  try {
    if (!o.depths.empty()) depths = cb::parse_depth_list(o.depths);
  } catch (const std::exception& e) {
    throw usage_error("--depths", std::string(e.what()).substr(std::string("--depths: ").size()));
  }
  for (const int d : depths)
    if (cb::complete_point_count(d, o.per_leaf) > 400'000'000)
      throw usage_error("--depths", fmt::format("depth {} with {} points per leaf is too large for a build benchmark", d, o.per_leaf));
  std::vector<std::int64_t> plummer;
  for (const std::string& t : o.plummer) plummer.push_back(parse_count(t));
  if (!cb::gpu_device_present()) {
    spdlog::error("bench build: no usable CUDA device (the GPU build is what it measures)");
    return exit_failed;
  }
  std::vector<cb::build_case> cases;
  for (const int d : depths) {
    // The lattice's points, shuffled; both builders make the adaptive tree of their bounding cube
    // (not the complete octree of the unit cube that `canopy bench` runs on).
    cb::build_case c{fmt::format("lattice {}x{} (max leaf {})", d, o.per_leaf, o.per_leaf), trees::generate_lattice(d, o.per_leaf, 1),
                     {o.per_leaf, 21}};
    std::shuffle(c.points.begin(), c.points.end(), std::mt19937_64(7));  // from unsorted points, like the Plummer cases
    cases.push_back(std::move(c));
  }
  for (const std::int64_t n : plummer)
    cases.push_back({fmt::format("plummer {} (max leaf {})", n, o.max_leaf), trees::generate_plummer(static_cast<std::size_t>(n), 1),
                     {o.max_leaf, 21}});
  cb::build_bench_options bo;
  bo.reps = o.reps;
  bo.host_reps = o.host_reps;
  cb::build_report rep;
  try {
    rep = cb::run_build_bench(cases, bo);
  } catch (const std::runtime_error& e) {
    spdlog::error("{}", e.what());
    return std::string(e.what()).find("differs") != std::string::npos ? exit_mismatch : exit_failed;
  }
  fmt::print("{}, copy bandwidth {:.0f} GB/s. Milliseconds, median (min-max); every GPU tree equal to the host's, node for node,\n"
             "before it was timed. stream: CUDA events around the enqueue (the builder waits for the host once per build);\n"
             "e2e: host clock until the host may use the result; pipeline: unsorted device points -> octree -> node task graph\n"
             "(build_into, then make_device_upward_graph of the built tree, on one stream).\n\n",
             rep.device, rep.copy_gb_per_s);
  for (const cb::build_result& r : rep.results) {
    fmt::print("{}: {} points, {} nodes, {} leaves, depth {}; GPU workspace {:.1f} bytes/point\n", r.label, r.points, r.nodes,
               r.leaves, r.depth, static_cast<double>(r.workspace_bytes) / static_cast<double>(std::max<std::size_t>(r.points, 1)));
    fmt::print("  host build_octree          {}\n", fmt_summary(r.host_ms));
    fmt::print("  GPU build, stream          {}   (floor {:.3f} ms at copy bandwidth: {:.0f}%)\n", fmt_summary(r.gpu_build_stream),
               r.floor_ms, 100.0 * r.floor_ms / r.gpu_build_stream.median);
    fmt::print("  GPU build, e2e             {}   ({:.1f}x the host build)\n", fmt_summary(r.gpu_build_e2e),
               r.host_ms.median / r.gpu_build_e2e.median);
    fmt::print("    phases: box {:.3f}, keys {:.3f}, sort {:.3f}, gather {:.3f}, spans {:.3f}, nodes {:.3f} (medians)\n",
               r.box.median, r.keys.median, r.sort.median, r.gather.median, r.spans.median, r.nodes_emit.median);
    fmt::print("  node task graph, stream    {}   (checked, from any device tree)\n", fmt_summary(r.node_graph_stream));
    fmt::print("  node task graph, stream    {}   (the builder's tree, trusted)\n", fmt_summary(r.trusted_graph_stream));
    fmt::print("  twig task graph, stream    {}\n", fmt_summary(r.twig_graph_stream));
    fmt::print("  pipeline, stream           {}\n", fmt_summary(r.pipeline_stream));
    fmt::print("  pipeline, e2e              {}\n", fmt_summary(r.pipeline_e2e));
    fmt::print("  pipeline, checked graph    {}   (e2e: build, wait, checked graph)\n\n", fmt_summary(r.pipeline_checked_e2e));
  }
  if (!o.json.empty()) {
    nlohmann::json j{{"schema", "canopy-bench-build/1"}, {"device", rep.device}, {"copy_bandwidth_gb_per_s", rep.copy_gb_per_s}};
    for (const cb::build_result& r : rep.results)
      j["results"].push_back({{"tree", r.label},
                              {"points", r.points},
                              {"nodes", r.nodes},
                              {"leaves", r.leaves},
                              {"depth", r.depth},
                              {"checked", r.checked},
                              {"workspace_bytes", r.workspace_bytes},
                              {"floor_ms", r.floor_ms},
                              {"host_build_ms", to_json(r.host_ms)},
                              {"gpu_build_stream_ms", to_json(r.gpu_build_stream)},
                              {"gpu_build_e2e_ms", to_json(r.gpu_build_e2e)},
                              {"node_graph_stream_ms", to_json(r.node_graph_stream)},
                              {"twig_graph_stream_ms", to_json(r.twig_graph_stream)},
                              {"trusted_graph_stream_ms", to_json(r.trusted_graph_stream)},
                              {"pipeline_stream_ms", to_json(r.pipeline_stream)},
                              {"pipeline_e2e_ms", to_json(r.pipeline_e2e)},
                              {"pipeline_checked_e2e_ms", to_json(r.pipeline_checked_e2e)},
                              {"phases_ms",
                               {{"box", to_json(r.box)},
                                {"keys", to_json(r.keys)},
                                {"sort", to_json(r.sort)},
                                {"gather", to_json(r.gather)},
                                {"spans", to_json(r.spans)},
                                {"nodes", to_json(r.nodes_emit)}}}});
    write_file_atomically(o.json, [&](std::ostream& out) {
      out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    });
  }
  return exit_ok;
}

}  // namespace

command add_bench_build_command(CLI::App& bench) {
  auto o = std::make_shared<build_bench_cli>();
  auto* cmd = bench.add_subcommand("build",
                                   "The octree build on the host (build_octree) against the GPU build (device_octree_builder) "
                                   "and the task graphs built on the device from it, from unsorted points; every GPU tree is "
                                   "checked against the host's before it is timed. Exit 0 done, 1 a GPU tree differed, 2 bad "
                                   "input, 3 no usable GPU");
  cmd->add_option("--depths", o->depths, "the points of complete octrees of these depths (lattices, shuffled), built as adaptive trees; empty for none")
      ->capture_default_str();
  cmd->add_option("--per-leaf", o->per_leaf, "points per leaf of the complete octrees")->check(CLI::Range(1, 1024))->capture_default_str();
  cmd->add_option("--plummer", o->plummer, "Plummer spheres of these sizes (comma-separated; k, M, G are powers of 1000); empty for none")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--max-leaf", o->max_leaf, "max leaf size of the Plummer trees")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--reps", o->reps, "timed GPU builds per tree")->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->add_option("--host-reps", o->host_reps, "timed host builds per tree")->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->add_option("--json", o->json, "also write the results as JSON to this file");
  CLI::App* parent = &bench;
  return {cmd, [o, parent] {
            for (const CLI::Option* opt : parent->get_options())
              if (opt->count() > 0 && opt->get_name() != "--help")
                throw usage_error(opt->get_name(), "is an option of canopy bench (the octree benchmark), not of canopy bench build");
            if (!o->json.empty()) check_output_path("--json", o->json);
            return run_build_bench_command(*o);
          }};
}

}  // namespace canopy::tool
