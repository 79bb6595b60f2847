// SPDX-License-Identifier: Apache-2.0
// canopy accumulate / canopy validate: run the upward pass on a backend; compare it with the
// double-precision reference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "backends.hpp"
#include "canopy/mode.hpp"
#include "canopy/push_policy.hpp"
#include "canopy/trees/reference.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "payload_text.hpp"
#include "distributed_commands.hpp"
#include "mpi_launch.hpp"
#include "scheduler_cli.hpp"

namespace canopy::tool {

namespace {

namespace trees = canopy::trees;

struct pass_options {
  std::string file;
  tree_options tree;
  backend_options backend;
  std::string build = "host";  ///< --build: where the tree the backend runs on is built
  bool json = false;
};

// Options that only the scheduler backends read; named in the warning when given with reference.
constexpr const char* scheduler_option_names[] = {"--blocks", "--threads", "--queue-capacity", "--push-policy",
                                                  "--mode", "--deadline-ms", "--reps", "--tasks"};

void add_pass_options(CLI::App& cmd, pass_options& o) {
  cmd.add_option("FILE", o.file, input_help)->required();
  add_tree_options(cmd, o.tree);
  cmd.add_option("--backend", o.backend.backend,
                 "reference (serial CPU, double), cpu (the scheduler on std::threads), gpu (CUDA), "
                 "or auto (gpu when a device is usable, else cpu)")
      ->check(CLI::IsMember({"reference", "cpu", "gpu", "auto"}))
      ->capture_default_str();
  add_scheduler_options(cmd, o.backend.scheduler);
  cmd.add_option("--reps", o.backend.reps,
                 "timed runs after one untimed warm-up run; the median is reported with min and max "
                 "(the payloads checked are the last run's). For comparisons across modes and baselines "
                 "use `canopy bench`")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  std::vector<std::string> tasks{"auto"};
  for (const auto t : trees::all_pass_tasks) tasks.emplace_back(trees::to_string(t));
  cmd.add_option_function<std::string>(
         "--tasks", [&o](const std::string& name) { o.backend.tasks = trees::parse_pass_tasks(name); },
         "twig: a task computes a node whose children are all leaves together with its leaves "
         "(8x fewer tasks on a complete tree; on an H100 GPU faster than node tasks on complete and "
         "adaptive trees, see bench/RESULTS.md); node: one task per octree node; bucket: a warp task "
         "per run of whole small subtrees of up to 128-256 points (not yet faster than twig); auto: twig "
         "on the gpu backend, node on the cpu backend")
      ->check(CLI::IsMember(tasks))
      ->default_str("auto");
  cmd.add_option("--build", o.build,
                 "where the octree the gpu backend runs on is built: host (build_octree, uploaded) or gpu "
                 "(device_octree_builder, task graph built on the device, no host copy; checked node for node "
                 "against the host build first). gpu needs --backend gpu")
      ->check(CLI::IsMember({"host", "gpu"}))
      ->capture_default_str();
  cmd.add_flag("--json", o.json, "print the result as JSON");
}

// The backend's options with --build applied: a gpu build (gpu backend only) rebuilds the tree from
// the loaded tree's points with the command's tree options.
backend_options backend_for(const pass_options& o) {
  backend_options b = o.backend;
  if (o.build != "gpu") return b;
  if (o.backend.backend != "gpu") throw usage_error("--build gpu", "needs --backend gpu");
  b.gpu_build = trees::build_options{o.tree.max_leaf, o.tree.max_depth};
  return b;
}

void warn_unused_scheduler_options(const CLI::App& cmd, const pass_options& o) {
  if (o.build == "gpu" && o.backend.backend != "gpu") throw usage_error("--build gpu", "needs --backend gpu");
  if (o.build == "gpu") require_adaptive_for_gpu_build(o.file, "--build gpu");
  if (o.backend.backend != "reference") return;
  for (const auto* name : scheduler_option_names)
    if (cmd.count(name) > 0) spdlog::warn("{} is ignored by --backend reference", name);
}

// "gpu on NVIDIA H100 ..., mode continuation": the mode once, whether or not the backend's device
// description already names it.
std::string backend_line(const backend_result& r, const backend_options& o) {
  const std::string mode(canopy::to_string(o.scheduler.mode));
  auto line = fmt::format("{} on {}", r.backend, r.device);
  if (r.device.find("mode " + mode) == std::string::npos) line += ", mode " + mode;
  return line;
}

// "12.3 us" or "12.3 us (median of 20, min 11.9, max 14.0)".
std::string time_text(const backend_result& r) {
  if (r.reps <= 1) return fmt::format("{:.1f} us", r.elapsed_us);
  return fmt::format("{:.1f} us (median of {}, min {:.1f}, max {:.1f})", r.elapsed_us, r.reps, r.min_us, r.max_us);
}

std::string describe(const loaded_tree& t) {
  return fmt::format("{} nodes, depth {}, {} points", grouped(t.tree.node_count()), t.tree.depth,
                     grouped(static_cast<long long>(t.tree.points.size())));
}

// A payload with inf or NaN is no result (JSON would print null): the run failed. build_octree bounds
// the masses and coordinates so that this cannot happen; checked anyway, never printed with exit 0.
template <class T>
void require_finite(const trees::multipole<T>& p, const std::string& backend) {
  bool finite = std::isfinite(p.mass);
  for (int i = 0; i < 3; ++i) finite = finite && std::isfinite(p.com[i]);
  for (int i = 0; i < 6; ++i) finite = finite && std::isfinite(p.m2[i]);
  if (!finite)
    throw std::runtime_error(fmt::format("{} backend: the root's moments are not finite (mass {}, m2 xx {})", backend,
                                         p.mass, p.m2[0]));
}

// The gpu backend sums a leaf's points per lane, in float, in order: a leaf of many thousands of
// points (a small --max-depth) loses digits that the cpu backend's blocked sums keep, and validate
// would find its bound too loose to check. Said once, on stderr; the result is still printed.
void warn_if_leaves_too_large(const trees::octree& tree, const std::string& backend) {
  if (backend != "gpu") return;
  std::int32_t largest = 0;
  for (const std::int32_t leaf : tree.leaves) largest = std::max(largest, tree.point_count[leaf]);
  const double u = std::numeric_limits<float>::epsilon() / 2.0;
  const double bound = 2.0 * (static_cast<double>(largest) + 7.0 * tree.depth + 8.0) * u;
  if (bound > trees::max_meaningful_mass_bound)
    spdlog::warn("the largest leaf holds {} points: the gpu backend's float sums over it may be off by up to {:.2g} "
                 "of the mass (--backend cpu sums it accurately; or lower --max-leaf, raise --max-depth)",
                 grouped(largest), bound);
}

// Under mpiexec: the same command across the ranks (cmd_distributed.cpp, in canopy-mpi).
int run_across_ranks(const pass_options& o, const CLI::App& cmd, bool validate) {
  distributed_pass_request q;
  q.input = o.file;
  q.tree = o.tree;
  q.backend = o.backend;
  q.validate = validate;
  q.json = o.json;
  q.build_given = cmd.count("--build") > 0;
  return mpi_launch::run_pass(q);
}

int run_accumulate(const pass_options& o, const CLI::App& cmd) {
  if (mpi_launch::active()) return run_across_ranks(o, cmd, false);
  warn_unused_scheduler_options(cmd, o);
  const auto loaded = load_tree(o.file, o.tree);
  const auto& tree = loaded.tree;
  nlohmann::json j{{"file", o.file}, {"nodes", tree.node_count()}, {"depth", tree.depth}};
  if (o.backend.backend == "reference") {
    stage s;
    const auto payloads = trees::reference_upward_pass(tree);
    const double ms = s.elapsed_ms();
    s.done("reference upward pass");
    require_finite(payloads.front(), "reference");
    if (o.json) {
      j.update({{"backend", "reference"}, {"device", "host (double)"}, {"elapsed_us", ms * 1e3}, {"root", payload_json(payloads.front())}});
      fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
      return exit_ok;
    }
    fmt::print("tree      {} ({})\nbackend   reference (serial host, double)\nroot\n", o.file, describe(loaded));
    print_payload(payloads.front());
    fmt::print("time      {:.3f} ms (upward pass only)\n", ms);
    return exit_ok;
  }
  const auto result = run_backend(tree, backend_for(o));
  spdlog::info("{} backend upward pass on {} ({})", result.backend, result.device, time_text(result));
  warn_if_leaves_too_large(tree, result.backend);
  if (result.payloads.size() != static_cast<std::size_t>(tree.node_count()))
    throw std::runtime_error(fmt::format("backend '{}' returned {} payloads for {} nodes", result.backend,
                                         result.payloads.size(), tree.node_count()));
  require_finite(result.payloads.front(), result.backend);
  if (o.json) {
    j.update({{"backend", result.backend}, {"device", result.device}, {"mode", canopy::to_string(o.backend.scheduler.mode)},
              {"elapsed_us", result.elapsed_us}, {"min_us", result.min_us}, {"max_us", result.max_us},
              {"reps", result.reps}, {"root", payload_json(result.payloads.front())}});
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return exit_ok;
  }
  fmt::print("tree      {} ({})\nbackend   {}\nroot\n", o.file, describe(loaded), backend_line(result, o.backend));
  print_payload(result.payloads.front());
  fmt::print("time      {} (upward pass only)\n", time_text(result));
  return exit_ok;
}

nlohmann::json quantity_json(const trees::quantity_error& q) {
  return {{"worst", q.worst}, {"node", q.node}, {"bound", q.bound}, {"within", q.within()}};
}

int report(const pass_options& o, const loaded_tree& loaded, const trees::comparison& c, const std::string& what,
           nlohmann::json j) {
  if (o.json) {
    j.update({{"file", o.file},
              {"nodes", loaded.tree.node_count()},
              {"depth", loaded.tree.depth},
              {"counts_match", c.counts_match},
              {"bounds_meaningful", c.bounds_meaningful},
              {"first_count_mismatch", c.first_count_mismatch},
              {"mass", quantity_json(c.mass)},
              {"com", quantity_json(c.com)},
              {"m2", quantity_json(c.m2)},
              {"bbox", quantity_json(c.bbox)},
              {"within_tolerance", c.within_tolerance}});
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return c.within_tolerance ? exit_ok : exit_mismatch;
  }
  fmt::print("tree      {} ({})\ncompared  {}\n", o.file, describe(loaded), what);
  if (c.counts_match)
    fmt::print("counts    match exactly at every node\n");
  else
    fmt::print("counts    DIFFER (first at node {})\n", c.first_count_mismatch);
  // Errors are relative, normalised per quantity (reference.hpp): mass by the mass, com by the
  // cell's size and position, m2 by m L^2, bbox by the cell's edge.
  fmt::print("\nquantity      worst error    at node         bound\n");
  const auto row = [](std::string_view name, const trees::quantity_error& q) {
    fmt::print("{:<9} {:>16.3e} {:>10} {:>13.3e}  {}\n", name, q.worst, q.node < 0 ? "-" : std::to_string(q.node),
               q.bound, q.within() ? "ok" : "OUT OF TOLERANCE");
  };
  row("mass", c.mass);
  row("com", c.com);
  row("m2", c.m2);
  row("bbox", c.bbox);
  if (!c.bounds_meaningful)
    fmt::print("\nbounds    too loose to check: the mass bound {:.3g} exceeds {:.0e} (a leaf too large for this "
               "summation; lower --max-leaf or raise --max-depth)\n",
               c.mass.bound, trees::max_meaningful_mass_bound);
  fmt::print("\nresult    {}\n", c.within_tolerance ? "PASS: within tolerance" : "FAIL: out of tolerance");
  return c.within_tolerance ? exit_ok : exit_mismatch;
}

int run_validate(const pass_options& o, const CLI::App& cmd) {
  if (mpi_launch::active()) return run_across_ranks(o, cmd, true);
  warn_unused_scheduler_options(cmd, o);
  const auto loaded = load_tree(o.file, o.tree);
  const auto& tree = loaded.tree;

  stage r;
  const auto reference = trees::reference_upward_pass(tree);
  const double reference_ms = r.elapsed_ms();
  r.done("reference upward pass");

  if (o.backend.backend == "reference") {
    // The reference checked against the oracle that merges nothing: every node's moments straight
    // from its own points.
    stage b;
    const auto brute = trees::brute_force_moments(tree);
    b.done("brute-force moments of every node");
    stage c;
    const auto cmp = trees::compare_payloads<double>(tree, reference, brute);
    c.done("compared");
    return report(o, loaded, cmp, "reference upward pass (double) vs brute-force moments of each node (double)",
                  {{"backend", "reference"}, {"against", "brute_force"}, {"elapsed_us", reference_ms * 1e3}});
  }

  const auto result = run_backend(tree, backend_for(o));
  spdlog::info("{} backend upward pass on {} ({})", result.backend, result.device, time_text(result));
  stage c;
  // The cpu backend sums leaves with trees::p2m (blocked, compensated), the gpu backend per lane.
  const auto cmp = trees::compare_payloads<float>(
      tree, result.payloads, reference,
      result.backend == "cpu" ? trees::leaf_summation::blocked : trees::leaf_summation::sequential);
  c.done("compared");
  return report(o, loaded, cmp,
                fmt::format("{} (float, {}) vs reference (double)", backend_line(result, o.backend),
                            time_text(result)),
                {{"backend", result.backend},
                 {"device", result.device},
                 {"mode", canopy::to_string(o.backend.scheduler.mode)},
                 {"against", "reference"},
                 {"elapsed_us", result.elapsed_us},
                 {"min_us", result.min_us},
                 {"max_us", result.max_us},
                 {"reps", result.reps}});
}

}  // namespace

command add_accumulate_command(CLI::App& app) {
  auto o = std::make_shared<pass_options>();
  auto* cmd = app.add_subcommand("accumulate", "Run the upward pass on a backend; print the root's payload "
                                               "(count, mass, centre of mass, second moments, bbox) and the time");
  add_pass_options(*cmd, *o);
  cmd->footer("Examples:\n  canopy accumulate plummer.bin --backend reference\n"
              "  canopy accumulate gen:lattice:5:8 --backend gpu --mode lockfree --push-policy least-loaded");
  return {cmd, [o, cmd] { return run_accumulate(*o, *cmd); }};
}

command add_validate_command(CLI::App& app) {
  auto o = std::make_shared<pass_options>();
  auto* cmd = app.add_subcommand(
      "validate",
      "Compare a backend's upward pass with the double-precision reference at every node: the worst "
      "error per quantity and whether counts match exactly. Exit 0 within tolerance, 1 otherwise. "
      "--backend reference checks the reference against brute-force moments of each node");
  add_pass_options(*cmd, *o);
  cmd->footer("Error bounds (per quantity, first order in float's roundoff) are documented in "
              "trees/octree/include/canopy/trees/reference.hpp.\nExamples:\n  canopy validate plummer.bin --backend reference\n"
              "  canopy validate plummer.bin --backend cpu --mode mutex");
  return {cmd, [o, cmd] { return run_validate(*o, *cmd); }};
}

}  // namespace canopy::tool
