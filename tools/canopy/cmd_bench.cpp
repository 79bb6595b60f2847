// SPDX-License-Identifier: Apache-2.0
// canopy bench: the benchmark by depth. Complete octrees of each depth (or one adaptive tree), every
// scheduler mode and baseline side by side, each result validated against the reference before it
// is timed. The engine is bench/octree (canopy::bench_octree); this file is its command line.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "canopy/detail/check_options.hpp"
#include "canopy/mode.hpp"
#include "canopy/push_policy.hpp"
#include "canopy/scheduler_options.hpp"
#include "canopy/version.hpp"
#include "canopy/trees/atomic_file.hpp"
#include "canopy/trees/generators.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "distributed_commands.hpp"
#include "mpi_launch.hpp"
#include "octree_bench.hpp"
#include "scheduler_cli.hpp"

extern char** environ;

namespace canopy::tool {

namespace {

namespace fs = std::filesystem;
namespace cb = canopy::bench;

struct bench_cli {
  std::string depths = "1-8";
  int per_leaf = 8;
  std::uint64_t seed = 1;
  std::string input;         // an adaptive tree from a file or generator spec
  std::string dist;          // ... or generated: --dist D -n N
  std::int64_t count = 0;
  tree_options tree;
  std::string modes;
  std::string backend = "auto";
  int reps = 20;
  int warmup = 3;
  double budget_ms = 2000;
  canopy::scheduler_options scheduler;  // --blocks, --threads, --push-policy (scheduler_cli.hpp)
  int cpu_workers = 0;
  int bucket_points = 0;
  std::string json, csv, plot;
  std::string inject_wrong_result;  // testing hook (hidden)
};

// An output file's folder must exist and the name must not be a folder: checked before minutes of
// benchmarking, not after.
// --plot F: F.png and F.svg; an extension .png or .svg given anyway is dropped.
fs::path plot_stem(const std::string& plot) {
  fs::path p = plot;
  if (p.extension() == ".png" || p.extension() == ".svg") p.replace_extension();
  return p;
}

fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// tools/plot/plot_bench.py: $CANOPY_PLOT_SCRIPT, else where `cmake --install` put it beside this
// binary (<prefix>/bin/canopy -> <prefix>/share/canopy/plot_bench.py), else beside the build tree
// this binary sits in (build/<dir>/tools/canopy), else the source tree it was built from, else
// ./tools/plot.
fs::path find_plot_script() {
  if (const char* env = std::getenv("CANOPY_PLOT_SCRIPT"); env != nullptr && *env != '\0') return env;
  std::vector<fs::path> candidates;
  if (const fs::path dir = executable_dir(); !dir.empty()) {
#ifdef CANOPY_INSTALLED_DATA_DIR
    candidates.push_back(dir / CANOPY_INSTALLED_DATA_DIR / "plot_bench.py");
#endif
    candidates.push_back(dir / "../../../tools/plot/plot_bench.py");
  }
#ifdef CANOPY_SOURCE_DIR
  candidates.push_back(fs::path(CANOPY_SOURCE_DIR) / "tools/plot/plot_bench.py");
#endif
  candidates.push_back("tools/plot/plot_bench.py");
  std::error_code ec;
  for (const fs::path& c : candidates)
    if (fs::is_regular_file(c, ec)) return fs::weakly_canonical(c, ec);
  return {};
}

// Runs `argv` and waits; returns the exit status (127 when it cannot be started).
int spawn_and_wait(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return 127;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The plot is made from the JSON by tools/plot/plot_bench.py (matplotlib). It is an extra: when it
// cannot be made, say why and how to make it later, but keep the benchmark's exit code.
void make_plot(const fs::path& json, const fs::path& stem, bool json_is_temporary) {
  const char* python_env = std::getenv("CANOPY_PYTHON");
  const std::string python = python_env != nullptr && *python_env != '\0' ? python_env : "/usr/bin/python3";
  const fs::path script = find_plot_script();
  const std::string later =
      json_is_temporary ? "" : fmt::format("; make it later with: python3 tools/plot/plot_bench.py {} -o {}", json.string(), stem.string());
  if (script.empty()) {
    spdlog::warn("--plot: tools/plot/plot_bench.py not found (set CANOPY_PLOT_SCRIPT); no plot written{}", later);
    return;
  }
  if (::access(python.c_str(), X_OK) != 0) {
    spdlog::warn("--plot: {} not found (set CANOPY_PYTHON); no plot written{}", python, later);
    return;
  }
  spdlog::debug("--plot: running {} {}", python, script.string());
  stage s;
  const int rc = spawn_and_wait({python, script.string(), json.string(), "-o", stem.string(), "--quiet"});
  if (rc != 0) {
    spdlog::warn("--plot: {} {} exited with {}; no plot written{}", python, script.string(), rc, later);
    return;
  }
  s.done(fmt::format("plotted {}.png and {}.svg", stem.string(), stem.string()));
}

std::vector<cb::tree_case> trees_to_run(const bench_cli& o, const CLI::App& cmd) {
  const auto given = [&](const char* name) { return cmd.count(name) > 0; };
  const bool adaptive = !o.input.empty() || !o.dist.empty();
  if (!adaptive) {
    if (given("-n")) throw usage_error("-n", "needs --dist (an adaptive tree of N generated points)");
    if (given("--max-leaf") || given("--max-depth"))
      throw usage_error("--max-leaf/--max-depth", "apply to adaptive trees (--input or --dist); complete trees "
                                                  "have --depths and --per-leaf");
    std::vector<int> depths;
    try {
      depths = cb::parse_depth_list(o.depths);
    } catch (const std::invalid_argument& e) {
      throw usage_error("--depths", std::string(e.what()).substr(std::string("--depths: ").size()));
    }
    for (int d : depths) {
      const long long n = cb::complete_point_count(d, o.per_leaf);
      if (n > std::numeric_limits<std::int32_t>::max())
        throw usage_error("--depths", fmt::format("depth {} with {} points per leaf has more than 2^31 - 1 points",
                                                  d, o.per_leaf));
    }
    std::vector<cb::tree_case> out;
    for (int d : depths) {
      const int per_leaf = o.per_leaf;
      const std::uint64_t seed = o.seed;
      out.push_back(cb::tree_case{fmt::format("depth {}", d), true, d, per_leaf,
                                  [d, per_leaf, seed] { return trees::build_complete_octree(d, per_leaf, seed); }});
    }
    return out;
  }
  if (!o.input.empty() && !o.dist.empty()) throw usage_error("--input/--dist", "give one tree source, not both");
  if (given("--depths") || given("--per-leaf"))
    throw usage_error("--depths/--per-leaf", "apply to complete trees, not to --input or --dist");
  std::string spec = o.input;
  if (!o.dist.empty()) {
    const auto dist = trees::parse_distribution(o.dist);  // input_error names it: exit 2
    if (dist == trees::distribution::lattice)
      throw usage_error("--dist lattice", "is the complete tree: use --depths and --per-leaf instead");
    if (!given("-n")) throw usage_error("--dist " + o.dist, "needs -n N");
    spec = fmt::format("gen:{}:{}:{}", trees::to_string(dist), o.count, o.seed);
  } else if (given("-n")) {
    throw usage_error("-n", "needs --dist (with --input the file says how many points)");
  }
  // A lattice spec builds a complete tree (load_tree ignores --max-leaf for it).
  const bool complete = spec.starts_with("gen:lattice:");
  int depth = 0, per_leaf = 0;
  if (complete) std::sscanf(spec.c_str(), "gen:lattice:%d:%d", &depth, &per_leaf);
  const std::string label = complete ? spec : fmt::format("{} (max-leaf {})", spec, o.tree.max_leaf);
  const tree_options topts = o.tree;
  // Fail on a bad spec or a missing file now, not after measuring the copy bandwidth.
  if (!spec.starts_with("gen:")) {
    std::error_code ec;
    if (!fs::exists(spec, ec)) throw usage_error(spec, "no such file");
  }
  return {cb::tree_case{label, complete, depth, per_leaf, [spec, topts] { return load_tree(spec, topts).tree; }}};
}

// Under mpiexec: the distributed pipeline of one adaptive tree, per mode (cmd_distributed.cpp, in
// canopy-mpi).
void fill_bench_request(const bench_cli& o, const CLI::App& cmd, distributed_bench_request& q) {
  const auto given = [&](const char* name) { return cmd.count(name) > 0; };
  for (const char* name : {"--depths", "--per-leaf", "--plot", "--budget-ms", "--cpu-workers", "--bucket-points"})
    if (given(name))
      throw usage_error(name, "applies to the benchmark on one process; under mpiexec canopy bench runs the "
                              "distributed upward pass of one adaptive tree (--dist D -n N or --input FILE)");
  if (!o.input.empty() && !o.dist.empty()) throw usage_error("--input/--dist", "give one tree source, not both");
  if (!o.dist.empty()) {
    if (!given("-n")) throw usage_error("--dist " + o.dist, "needs -n N");
    q.input = fmt::format("gen:{}:{}:{}", o.dist, o.count, o.seed);
  } else if (!o.input.empty()) {
    q.input = o.input;
  } else {
    throw usage_error("canopy bench", "under mpiexec give the points: --dist D -n N (N over all ranks) or --input FILE");
  }
  q.tree = o.tree;
  q.modes = o.modes;
  q.backend = o.backend;
  q.scheduler = o.scheduler;
  q.reps = o.reps;
  q.warmup = o.warmup;
  q.json = o.json;
  q.csv = o.csv;
}

// Options that do not fit are said by the ranks' agreement (usage_problem), in one line.
int run_bench_across_ranks(const bench_cli& o, const CLI::App& cmd) {
  distributed_bench_request q;
  try {
    fill_bench_request(o, cmd, q);
  } catch (const usage_error& e) {
    q.usage_problem = e.what();
  }
  return mpi_launch::run_bench(q);
}

int run_bench(const bench_cli& o, const CLI::App& cmd) {
  if (mpi_launch::active()) return run_bench_across_ranks(o, cmd);
  // Everything the user gave is checked before the first tree is built.
  const auto trees_list = trees_to_run(o, cmd);
  if (!o.json.empty()) check_output_path("--json " + o.json, o.json);
  if (!o.csv.empty()) check_output_path("--csv " + o.csv, o.csv);
  fs::path stem;
  if (!o.plot.empty()) {
    stem = plot_stem(o.plot);
    check_output_path("--plot " + stem.string() + ".png", fs::path(stem.string() + ".png"));
  }
  check_distinct_outputs({{"--json " + o.json, o.json},
                          {"--csv " + o.csv, o.csv},
                          {"--plot " + stem.string() + ".png", stem.empty() ? fs::path() : fs::path(stem.string() + ".png")},
                          {"--plot " + stem.string() + ".svg", stem.empty() ? fs::path() : fs::path(stem.string() + ".svg")}});
  if (o.reps < 20)
    spdlog::warn("--reps {}: fewer than the 20 timed runs the design asks for behind a reported median", o.reps);

  std::string backend = o.backend, note;
  const bool gpu = cb::gpu_device_present();
  if (backend == "gpu" && !gpu)
    throw std::runtime_error("gpu backend: no CUDA device is available (use --backend cpu, or auto)");
  if (backend == "auto") {
    backend = gpu ? "gpu" : "cpu";
    if (!gpu)
      note = CANOPY_HAVE_GPU ? "no CUDA device: the scheduler modes run on the cpu backend, beside the serial reference"
                             : "built without CUDA: the scheduler modes run on the cpu backend, beside the serial reference";
  }
  std::vector<cb::variant> variants;
  try {
    variants = cb::parse_variant_list(o.modes, backend);
  } catch (const std::invalid_argument& e) {
    throw usage_error("--modes", std::string(e.what()).substr(std::string("--modes: ").size()));
  }
  if (!o.inject_wrong_result.empty() &&
      std::none_of(variants.begin(), variants.end(), [&](const cb::variant& v) { return v.name == o.inject_wrong_result; }))
    throw usage_error("--inject-wrong-result", "'" + o.inject_wrong_result + "' is not among the modes that run");
  if (!note.empty()) spdlog::info("{}", note);

  cb::bench_options bo;
  bo.reps = o.reps;
  bo.warmup = o.warmup;
  bo.budget_ms = o.budget_ms;
  bo.scheduler.blocks = backend == "gpu" ? o.scheduler.blocks : 0;
  bo.scheduler.threads_per_block = o.scheduler.threads_per_block;
  bo.scheduler.policy = o.scheduler.policy;
  bo.cpu_workers = backend == "cpu" && o.scheduler.blocks > 0 ? o.scheduler.blocks : o.cpu_workers;
  // Refused here, as accumulate's scheduler refuses it (exit 2), not as a failed run of each mode.
  if (bo.cpu_workers > canopy::detail::max_cpu_workers)
    throw usage_error("--blocks", fmt::format("the cpu backend starts at most {} worker threads, not {}",
                                              canopy::detail::max_cpu_workers, bo.cpu_workers));
  bo.inject_wrong_result = o.inject_wrong_result;
  bo.bucket_points = o.bucket_points;

  cb::bench_engine engine(bo, [](const std::string& line) { spdlog::info("{}", line); });
  if (backend == "gpu") engine.add_platform(cb::make_gpu_platform());
  engine.add_platform(cb::make_host_platform());
  stage total;
  cb::bench_report report = engine.run(trees_list, variants, backend, note);
  // The revision this binary's canopy::runtime was built from ("unknown" outside a git checkout),
  // not whatever checkout the current directory happens to be in.
  report.git_commit = canopy::git_revision();
  total.done("benchmark");

  cb::print_table(report, std::cout);
  flush_standard_output();  // the table before the files; a failure is reported at exit
  if (!o.json.empty()) write_file_atomically(o.json, [&](std::ostream& out) { cb::write_json(report, out); });
  if (!o.csv.empty()) write_file_atomically(o.csv, [&](std::ostream& out) { cb::write_csv(report, out); });
  if (!o.plot.empty()) {
    if (!o.json.empty()) {
      make_plot(o.json, stem, false);
    } else {
      // Removed when plotting ends, and by the SIGINT/SIGTERM handler while it runs.
      const canopy::trees::scoped_temporary_file temp(
          fs::path(stem.string() + fmt::format(".json{}{}", canopy::trees::temporary_marker, ::getpid())));
      write_file_atomically(temp.path(), [&](std::ostream& out) { cb::write_json(report, out); });
      make_plot(temp.path(), stem, true);
    }
  }
  if (report.any_wrong_result()) return exit_mismatch;
  if (report.any_run_failed()) return exit_failed;
  return exit_ok;
}

}  // namespace

command add_bench_command(CLI::App& app) {
  auto o = std::make_shared<bench_cli>();
  auto* cmd = app.add_subcommand(
      "bench",
      "The benchmark by depth: the upward pass of complete octrees (or one adaptive tree) by every scheduler "
      "mode and baseline, each result validated against the double-precision reference before it is timed "
      "(median, min and max of --reps runs after warm-up). On the GPU when one is usable, else on the cpu "
      "backend. Exit 0 done, 1 a result was wrong, 2 bad input, 3 a run failed");
  cmd->add_option("--depths", o->depths, "complete octrees of these depths: a range and/or list, e.g. 1-8 or 3,5,7")
      ->capture_default_str();
  cmd->add_option("--per-leaf", o->per_leaf, "points in each leaf of the complete octrees")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()))
      ->capture_default_str();
  add_seed_option(*cmd, o->seed, "seed of the generated points");
  cmd->add_option("--input", o->input, std::string("one adaptive tree instead of the complete ones: ") + input_help);
  cmd->add_option("--dist", o->dist, "one adaptive tree of generated points instead: uniform, plummer or clusters "
                                     "(with -n)");
  cmd->add_option("-n,--count", o->count, "--dist: number of points (suffixes k, M, G are powers of 1000: 16M)")
      ->transform(CLI::AsSizeValue(true))
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{std::numeric_limits<std::int32_t>::max()}));
  add_tree_options(*cmd, o->tree);
  std::string mode_names;
  for (const auto m : canopy::all_modes) mode_names += (mode_names.empty() ? "" : ", ") + std::string(canopy::to_string(m));
  cmd->add_option("--modes", o->modes,
                  "comma list of what to run (default all): scheduler modes (" + mode_names +
                      "), GPU baselines (level-kernels, level-graph, last-arriver), reference, cpu:MODE (cpu = "
                      "cpu:" + std::string(canopy::to_string(canopy::scheduler_options{}.mode)) +
                      "), MODE+TASKS (TASKS: node, twig or bucket, e.g. continuation+twig; the octree pass's task "
                      "kinds), or modes, twigs (every mode with twig tasks), baselines, all");
  cmd->add_option("--backend", o->backend, "where the scheduler modes run: gpu, cpu, or auto (gpu when a device is "
                                           "usable, else cpu)")
      ->check(CLI::IsMember({"gpu", "cpu", "auto"}))
      ->capture_default_str();
  cmd->add_option("--reps", o->reps, "timed runs per result (fewer than 20 only when asked for)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed runs before the timed ones")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--budget-ms", o->budget_ms,
                  "time one mode may spend on one tree (validation, warm-up and timed runs); a mode over it is "
                  "reported as skipped (over budget) there and on every deeper tree")
      ->check(milliseconds_check("the budget", 0.0))
      ->capture_default_str();
  add_scheduler_options(*cmd, o->scheduler, option_blocks | option_threads | option_push_policy,
                        "gpu: blocks of the persistent kernel (0 = all co-resident); on --backend cpu: worker threads");
  cmd->add_option("--cpu-workers", o->cpu_workers,
                  fmt::format("worker threads of the cpu backend (0 = one per core; at most {})",
                              canopy::detail::max_cpu_workers))
      ->check(CLI::Range(0, canopy::detail::max_cpu_workers))
      ->capture_default_str();
  cmd->add_option("--bucket-points", o->bucket_points,
                  "MODE+bucket: the most points of one bucket task (0 = chosen by the tree's size)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--json", o->json, "also write the results as JSON to this file");
  cmd->add_option("--csv", o->csv, "also write the results as CSV to this file");
  cmd->add_option("--plot", o->plot, "also plot time against depth per mode (log scale) to F.png and F.svg, with "
                                     "tools/plot/plot_bench.py (/usr/bin/python3 and matplotlib)");
  cmd->add_option("--inject-wrong-result", o->inject_wrong_result,
                  "testing: perturb this mode's result after it runs, to check that a wrong result fails")
      ->group("");  // hidden: for the tests, not for users
  cmd->footer("Examples:\n  canopy bench                                   # depths 1-8, every mode and baseline\n"
              "  canopy bench --depths 3,5 --modes continuation,lockfree,level-graph --json r.json\n"
              "  canopy bench --dist plummer -n 16M --max-leaf 32 --plot plummer\n"
              "Without a CUDA device the scheduler modes run on the cpu backend (and it says so).");
  const command atomics = add_bench_atomics_command(*cmd);  // `canopy bench atomics`: the atomics lab
  const command build = add_bench_build_command(*cmd);      // `canopy bench build`: host and GPU octree builds
  return {cmd, [o, cmd, atomics, build] {
            if (atomics.first->parsed()) return atomics.second();
            return build.first->parsed() ? build.second() : run_bench(*o, *cmd);
          }};
}

}  // namespace canopy::tool
