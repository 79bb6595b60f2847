// SPDX-License-Identifier: Apache-2.0
// The benchmark by depth (`canopy bench`): the octree upward pass of each tree computed by every
// scheduler mode and every baseline, each result checked against the double-precision reference
// before its time counts, then timed (warm-up, median of the timed runs, min, max).
//
//   canopy::bench::bench_engine engine(options, [](const std::string& line) { log(line); });
//   engine.add_platform(canopy::bench::make_gpu_platform());    // nullptr without CUDA: ignored
//   engine.add_platform(canopy::bench::make_host_platform());   // the reference and the cpu backend
//   canopy::bench::bench_report report = engine.run(trees, variants);
//   canopy::bench::print_table(report, std::cout);
//
// Host-only header (g++ or nvcc). The GPU platform lives in gpu_platform.cu, compiled only under
// CANOPY_GPU; everything else runs on any machine.
#pragma once

#include <canopy/mode.hpp>
#include <canopy/passes/upward_runner.hpp>
#include <canopy/scheduler_options.hpp>
#include <canopy/status.hpp>
#include <canopy/trees/multipole.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/reference.hpp>

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/stats.hpp"

namespace canopy::bench {

// ---- what runs ----------------------------------------------------------------------------------

/// Where a variant runs: "gpu" (the persistent kernel and the GPU baselines), "cpu" (the scheduler
/// on std::thread workers) or "host" (the serial double-precision reference).
inline constexpr std::string_view backend_gpu = "gpu";
inline constexpr std::string_view backend_cpu = "cpu";
inline constexpr std::string_view backend_host = "host";

/// One way of computing the upward pass: a scheduler mode on a backend, or a baseline.
struct variant {
  std::string name;                  ///< as shown: "continuation", "level-graph", "reference", "cpu:lockfree"
  std::string backend;               ///< backend_gpu, backend_cpu or backend_host
  bool baseline = false;             ///< what a user would run instead of the scheduler
  std::optional<canopy::mode> mode;  ///< the scheduler mode (gpu and cpu backends), none for baselines' kernels
  /// How the scheduler's pass is cut into tasks (canopy/passes/upward_runner.hpp); any kind but
  /// node tasks is named "MODE+KIND", e.g. "continuation+twig".
  trees::pass_tasks tasks = trees::pass_tasks::node;
};

/// The GPU baselines of bench/baselines, by name.
inline constexpr std::string_view gpu_baseline_names[] = {"level-kernels", "level-graph", "last-arriver"};

/// "1-8", "5", "1,3,5-7" -> the depths in increasing order, each once. Depths lie in [0, max_depth].
/// Throws std::invalid_argument with a message that quotes the bad item.
std::vector<int> parse_depth_list(std::string_view text, int max_depth = trees::max_octree_depth);

/// What runs when --modes is not given, for scheduler modes on `backend` ("gpu" or "cpu"):
/// gpu: every mode, the three GPU baselines, the reference and the cpu backend (continuation);
/// cpu: every mode on the cpu backend and the reference.
std::vector<variant> default_variants(std::string_view backend);

/// A comma list of variant names for scheduler modes on `backend`: a mode name (on `backend`), a GPU
/// baseline name, "reference", "cpu" (= "cpu:continuation") or "cpu:MODE" (the cpu backend as a
/// baseline beside the GPU), "modes" (every mode), "baselines" (every baseline of `backend`'s
/// default set), "all" (the default set). Duplicates are dropped, the order is kept. On the cpu
/// backend "cpu:MODE" is the mode itself. Throws std::invalid_argument naming the bad item.
std::vector<variant> parse_variant_list(std::string_view list, std::string_view backend);

// ---- the trees ----------------------------------------------------------------------------------

/// One tree of the benchmark; built only when some variant still has to run on it.
struct tree_case {
  std::string label;       ///< "depth 5" or "gen:plummer:16000000 (max-leaf 32)"
  bool complete = true;    ///< a complete octree (depth, per_leaf) or an adaptive one
  int depth = 0;           ///< complete: its depth (adaptive: filled in from the built tree)
  int per_leaf = 0;        ///< complete: points per leaf (adaptive: 0)
  std::function<trees::octree()> build;
};

/// The fewest bytes a pass must move, for achieved bandwidth: every point read once,
/// every payload written once and every non-root payload read once by its parent. The same number
/// as upward_pass_bytes(octree_ref) of bench/baselines, from the host tree.
std::size_t upward_pass_bytes(const trees::octree& tree) noexcept;

/// Closed form of a complete octree's size, for checking a --depths list before building anything.
long long complete_node_count(int depth) noexcept;
long long complete_point_count(int depth, int per_leaf) noexcept;  ///< saturates at LLONG_MAX

// ---- options and results ------------------------------------------------------------------------

struct bench_options {
  int reps = 20;            ///< timed runs per result (the design asks for at least 20)
  int warmup = 3;           ///< untimed runs before them
  /// Time one variant may take on one tree: the validation run, the warm-up and the timed runs. A
  /// run past it ends (scheduler deadline) and the variant is "skipped (over budget)" on this and
  /// every later tree; so is a validated variant whose warm-up and timed runs would take longer.
  double budget_ms = 2000;
  /// Scheduler settings for the gpu and cpu modes (blocks, threads, push policy); mode and deadline
  /// are set per run (the deadline from budget_ms).
  canopy::scheduler_options scheduler;
  /// Worker threads of the cpu backend (0: one per hardware thread); scheduler.blocks is the GPU's.
  int cpu_workers = 0;
  /// Bucket tasks (MODE+bucket): the most points of one bucket; 0 = trees::default_bucket_points.
  int bucket_points = 0;
  /// Testing hook: the variant of this name has its validated result perturbed (the root's mass
  /// by 1 %), so the wrong-result path can be exercised without a broken kernel. Empty: none.
  std::string inject_wrong_result;
};

enum class entry_status { ok, fail, skipped };
std::string_view to_string(entry_status s) noexcept;  ///< "ok", "fail", "skipped"

/// One (tree, variant) result. Times in microseconds; 0 where not measured.
struct bench_entry {
  // the tree
  std::string tree;  ///< tree_case::label
  bool complete = true;
  int depth = 0, per_leaf = 0;
  long long nodes = 0, leaves = 0, points = 0;
  double bytes = 0;  ///< upward_pass_bytes
  // the variant
  std::string variant, backend;
  bool baseline = false;
  // the outcome
  entry_status status = entry_status::skipped;
  bool over_budget = false;   ///< skipped because of the budget (here or on an earlier tree)
  bool wrong_result = false;  ///< failed validation (the command exits 1)
  std::string note;           ///< why it failed or was skipped; for ok rows the validation summary
  int reps = 0;
  /// Stream time (T1): on the GPU CUDA events around the enqueue, with no host wait between them
  /// (the scheduler's run_async, a baseline's launches); on the host the host clock of the call.
  double median_us = 0, min_us = 0, max_us = 0;
  /// End-to-end time (T2): the host clock from the call until the host knows the result (the
  /// stream synchronised and, for the scheduler, its status read). Equal to T1 on the host.
  double e2e_median_us = 0, e2e_min_us = 0, e2e_max_us = 0;
  double first_run_us = 0;    ///< the validation run (cold: first launch of the kernel included)
  // derived by finish_report
  double gb_per_s = 0;                  ///< bytes / median
  double percent_of_copy = 0;           ///< gb_per_s / the backend's measured copy bandwidth * 100
  double speedup_vs_mutex = 0;          ///< mutex median / this median (same tree, same backend)
  double speedup_vs_best_baseline = 0;  ///< best baseline median / this median (same tree), stream time
  double e2e_speedup_vs_best_baseline = 0;  ///< the same on end-to-end time (the best baseline by that clock)
  std::string best_baseline;            ///< the fastest validated baseline on this tree (stream time)
  std::string best_e2e_baseline;        ///< the fastest by end-to-end time
};

/// What is known about a backend's machine, for the header and the JSON.
struct platform_facts {
  std::string backend;         ///< "gpu", "cpu" or "host"
  std::string device;          ///< "NVIDIA H100 80GB HBM3" or "2 CPU workers"
  int sm_count = 0;            ///< gpu only
  std::string driver;          ///< gpu: "CUDA driver 13.0, runtime 13.0"
  double copy_gb_per_s = 0;    ///< measured copy bandwidth, read + written bytes per second / 1e9
  std::string copy_method;     ///< how it was measured
};

struct bench_report {
  std::string backend;                 ///< where the scheduler modes ran: "gpu" or "cpu"
  std::string backend_note;            ///< e.g. "no CUDA device: the scheduler runs on the cpu backend"
  std::vector<platform_facts> platforms;
  bench_options options;
  std::string git_commit;              ///< empty when unknown
  std::vector<bench_entry> entries;    ///< tree by tree, variants in the order given

  bool any_wrong_result() const;       ///< some result failed validation
  bool any_run_failed() const;         ///< some run ended in an error (not a wrong result, not a skip)
  const platform_facts* facts(std::string_view backend) const;  ///< nullptr when not used
};

/// Fills the derived fields (GB/s, % of copy, speed-ups). bench_engine::run calls it.
void finish_report(bench_report& report);

/// The terminal table: a header (device, copy bandwidth, timing method), one block per tree, and a
/// summary of the median microseconds by tree and variant.
void print_table(const bench_report& report, std::ostream& out);
/// Self-describing JSON (schema "canopy-bench-octree/1"): metadata and one object per entry.
void write_json(const bench_report& report, std::ostream& out);
/// One line per entry, the JSON's entry fields as columns.
void write_csv(const bench_report& report, std::ostream& out);

// ---- the platforms and the engine ---------------------------------------------------------------

/// The end of one untimed run.
struct run_outcome {
  canopy::status code = canopy::status::ok;
  std::string message;
  double elapsed_us = 0;  ///< wall time of the run, as the runner's timing method measures it
};

/// The timed runs of one variant: both clocks, sample by sample from the same runs.
struct timed_runs {
  summary stream;  ///< T1, see bench_entry::median_us
  summary e2e;     ///< T2, see bench_entry::e2e_median_us
};

/// One variant on the tree its platform has loaded.
class pass_runner {
 public:
  virtual ~pass_runner() = default;
  /// Poisons the output (so a stale correct result cannot pass), runs one pass, waits for it.
  virtual run_outcome run_once() = 0;
  /// The last run's payloads against the reference; with `perturb`, after changing the root's mass
  /// by 1 % (bench_options::inject_wrong_result).
  virtual trees::comparison check(const trees::octree& tree, std::span<const trees::multipole<double>> reference,
                                  bool perturb) = 0;
  /// `warmup` untimed runs, then `reps` timed ones. Throws std::runtime_error when a run fails.
  virtual timed_runs time(int warmup, int reps) = 0;
  /// How it ran, for the note of a validated result (e.g. "528 blocks x 128 threads, 2 lanes per task").
  virtual std::string detail() const { return {}; }
};

/// A machine the variants run on: loads a tree (uploads it), makes a runner per variant.
class platform {
 public:
  virtual ~platform() = default;
  virtual std::vector<std::string> backends() const = 0;  ///< the backend names it runs
  /// Facts about the machine; measures the copy bandwidth on the first call.
  virtual std::vector<platform_facts> facts(const bench_options& options) = 0;
  virtual void load(const trees::octree& tree, const bench_options& options) = 0;
  virtual void unload() = 0;
  /// Throws std::invalid_argument for a variant it does not run.
  virtual std::unique_ptr<pass_runner> runner(const variant& v) = 0;
  /// False after an error that poisons every later run (a sticky CUDA error): the engine stops.
  virtual bool healthy() { return true; }
};

/// The serial reference ("host") and the scheduler on std::thread workers ("cpu").
std::unique_ptr<platform> make_host_platform();
/// The GPU: scheduler modes and the baselines of bench/baselines. nullptr when this build has no
/// CUDA support or no device is usable.
std::unique_ptr<platform> make_gpu_platform();
/// A usable CUDA device is present (false in a build without CUDA support).
bool gpu_device_present();

class bench_engine {
 public:
  using progress_fn = std::function<void(const std::string&)>;
  explicit bench_engine(bench_options options, progress_fn progress = {});

  /// Registers a platform for the backends it names (a null pointer is ignored).
  void add_platform(std::unique_ptr<platform> p);
  bool has_backend(std::string_view backend) const;

  /// Runs every variant on every tree, in order; `backend` and `backend_note` go into the report.
  /// A variant whose backend has no platform is skipped with a note; after a platform becomes
  /// unusable (platform::healthy) its variants are skipped with a note, the others go on. Throws
  /// only when a tree cannot be built or loaded.
  bench_report run(const std::vector<tree_case>& trees, const std::vector<variant>& variants,
                   const std::string& backend, const std::string& backend_note = {});

 private:
  bench_options options_;
  progress_fn progress_;
  std::vector<std::unique_ptr<platform>> platforms_;
};

}  // namespace canopy::bench
