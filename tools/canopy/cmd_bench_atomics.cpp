// SPDX-License-Identifier: Apache-2.0
// canopy bench atomics: the atomics lab (bench/atomics, canopy::atomics_lab) as a subcommand of
// `canopy bench`. This file is only its command line: options are checked here (one
// "canopy: error:" line, exit 2), then canopy::bench::run_atomics_lab does the work. The standalone
// canopy-atomics-lab runs the same library with the same options.
//
// Without a usable CUDA device, or in a canopy built without CUDA (CANOPY_GPU=OFF), it logs one
// warning line saying the lab needs a CUDA device and exits 0, as `canopy bench` does when it falls
// back to the cpu backend: nothing is measured and no file is written.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "commands.hpp"
#include "common.hpp"
#include "common/sizes.hpp"
#include "octree_bench.hpp"  // gpu_device_present()
#if CANOPY_HAVE_ATOMICS_LAB
#include "atomics_lab.hpp"
#endif

namespace canopy::tool {

namespace {

namespace fs = std::filesystem;

struct atomics_cli {
  std::string sizes = "1M,16M,64M";
  std::string experiments;
  int reps = 20;
  int warmup = 3;
  int device = 0;
  std::string json, csv, plot;
};

const std::vector<std::string> experiment_names = {"containers", "max", "filter", "histogram", "copy"};

#if CANOPY_HAVE_ATOMICS_LAB
// tools/plot/plot_atomics.py: $CANOPY_ATOMICS_PLOT_SCRIPT, else where `cmake --install` put it
// (<prefix>/share/canopy beside <prefix>/bin/canopy), else beside the build tree this binary sits
// in (build/<dir>/tools/canopy), else the source tree it was built from, else ./tools/plot.
fs::path find_atomics_plot_script() {
  if (const char* env = std::getenv("CANOPY_ATOMICS_PLOT_SCRIPT"); env != nullptr && *env != '\0') return env;
  std::vector<fs::path> candidates;
  std::error_code ec;
  if (const fs::path exe = fs::read_symlink("/proc/self/exe", ec); !ec) {
#ifdef CANOPY_INSTALLED_DATA_DIR
    candidates.push_back(exe.parent_path() / CANOPY_INSTALLED_DATA_DIR / "plot_atomics.py");
#endif
    candidates.push_back(exe.parent_path() / "../../../tools/plot/plot_atomics.py");
  }
#ifdef CANOPY_SOURCE_DIR
  candidates.push_back(fs::path(CANOPY_SOURCE_DIR) / "tools/plot/plot_atomics.py");
#endif
  candidates.push_back("tools/plot/plot_atomics.py");
  for (const fs::path& c : candidates)
    if (fs::is_regular_file(c, ec)) return fs::weakly_canonical(c, ec);
  return {};
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
#endif

int run_atomics(const atomics_cli& o) {
  // Everything the user gave is checked first, device or not.
  std::vector<std::uint64_t> sizes;
  try {
    sizes = canopy::bench::parse_size_list(o.sizes);
  } catch (const std::invalid_argument& e) {
    throw usage_error("--sizes " + o.sizes, e.what());
  }
  for (std::uint64_t n : sizes)
    if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max()))
      throw usage_error("--sizes", fmt::format("{} elements is more than 2^31 - 1 (32-bit indices)", n));
  std::vector<std::string> experiments;
  if (!o.experiments.empty()) {
    for (const std::string_view e : canopy::bench::split(o.experiments, ',')) experiments.emplace_back(e);
    for (const std::string& e : experiments)
      if (std::find(experiment_names.begin(), experiment_names.end(), e) == experiment_names.end())
        throw usage_error("--experiments", fmt::format("unknown experiment '{}' (containers, max, filter, histogram, "
                                                       "copy)", e));
  }
  if (!o.json.empty()) check_output_path("--json " + o.json, o.json);
  if (!o.csv.empty()) check_output_path("--csv " + o.csv, o.csv);
  fs::path stem;
  if (!o.plot.empty()) {
    stem = o.plot;
    if (stem.extension() == ".png" || stem.extension() == ".svg") stem.replace_extension();
    check_output_path("--plot " + stem.string() + ".png", fs::path(stem.string() + ".png"));
  }
  // Without --json, the lab writes the plot's JSON to STEM.json.
  const bool plot_json = !stem.empty() && o.json.empty();
  check_distinct_outputs({{"--json " + o.json, o.json},
                          {"--csv " + o.csv, o.csv},
                          {"--plot " + stem.string() + ".png", stem.empty() ? fs::path() : fs::path(stem.string() + ".png")},
                          {"--plot " + stem.string() + ".svg", stem.empty() ? fs::path() : fs::path(stem.string() + ".svg")},
                          {"--plot " + stem.string() + ".json", plot_json ? fs::path(stem.string() + ".json") : fs::path()}});

#if !CANOPY_HAVE_ATOMICS_LAB
  spdlog::warn("bench atomics: the atomics lab needs a CUDA device, and this canopy was built without CUDA "
               "(CANOPY_GPU=OFF); nothing measured");
  return exit_ok;
#else
  if (!canopy::bench::gpu_device_present()) {
    spdlog::warn("bench atomics: the atomics lab needs a CUDA device and none is usable; nothing measured");
    return exit_ok;
  }
  canopy::bench::atomics_lab_options lab;
  lab.sizes = sizes;
  lab.experiments = experiments;
  lab.reps = o.reps;
  lab.warmup = o.warmup;
  lab.device = o.device;
  lab.json_path = o.json;
  lab.csv_path = o.csv;
  lab.progress = [](const std::string& line) { spdlog::info("{}", line); };
  if (!o.plot.empty()) {
    // The lab writes the JSON (to --json, else to STEM.json) and then runs the plot command.
    const char* python_env = std::getenv("CANOPY_PYTHON");
    const std::string python = python_env != nullptr && *python_env != '\0' ? python_env : "/usr/bin/python3";
    const fs::path script = find_atomics_plot_script();
    if (script.empty()) {
      spdlog::warn("--plot: tools/plot/plot_atomics.py not found (set CANOPY_ATOMICS_PLOT_SCRIPT); no plot written");
    } else if (::access(python.c_str(), X_OK) != 0) {
      spdlog::warn("--plot: {} not found (set CANOPY_PYTHON); no plot written", python);
    } else {
      lab.plot_path = stem.string();
      lab.plot_command = shell_quote(python) + " " + shell_quote(script.string()) + " {json} -o {plot} --quiet";
    }
  }
  const int rc = canopy::bench::run_atomics_lab(lab);
  if (rc == 0 && !lab.plot_path.empty() && fs::exists(stem.string() + ".png"))
    spdlog::info("plotted {}.png and {}.svg", stem.string(), stem.string());
  // The lab's codes: 0 all validated, 1 a wrong result or CUDA error, 2 bad options, 77 no device.
  if (rc == 77) {
    spdlog::warn("bench atomics: the atomics lab needs a CUDA device and none is usable; nothing measured");
    return exit_ok;
  }
  return rc;
#endif
}

}  // namespace

command add_bench_atomics_command(CLI::App& bench) {
  auto o = std::make_shared<atomics_cli>();
  auto* cmd = bench.add_subcommand(
      "atomics",
      "The atomics lab: the atomic-operation techniques the scheduler's queues build on, side by side on the GPU (containers count, "
      "global max, filtering incl. CUB DeviceSelect, 256-bin histogram incl. CUB DeviceHistogram, int/int2/int4 "
      "copies vs cudaMemcpy), each variant validated against a host result before its time counts; G elements/s "
      "and the ratio to the naive variant. Exit 0 done (also: no CUDA device, nothing measured), 1 a variant gave "
      "a wrong result or a CUDA error, 2 bad input");
  cmd->add_option("--sizes", o->sizes, "element counts, comma-separated; K/M/G are binary (1M = 2^20), up to 2^31 - 1")
      ->capture_default_str();
  cmd->add_option("--experiments", o->experiments,
                  "subset to run: containers,max,filter,histogram,copy (default: all)");
  cmd->add_option("--reps", o->reps, "timed runs per variant (median, min, max reported)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed runs before the timed ones")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--device", o->device, "CUDA device ordinal")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--json", o->json, "also write the results as JSON (schema canopy-bench-results/1) to this file");
  cmd->add_option("--csv", o->csv, "also write the results as CSV to this file");
  cmd->add_option("--plot", o->plot,
                  "also plot G elements/s against size per variant, one panel per experiment, to F.png and F.svg "
                  "with tools/plot/plot_atomics.py (/usr/bin/python3 and matplotlib); the JSON goes to --json, "
                  "else F.json");
  cmd->footer("Examples:\n  canopy bench atomics                                  # 1M,16M,64M, 20 reps\n"
              "  canopy bench atomics --sizes 1M,16M,256M --json lab.json --csv lab.csv --plot lab\n"
              "  canopy bench atomics --experiments filter,histogram --reps 50\n"
              "The standalone canopy-atomics-lab runs the same lab (exit 77 without a device).");
  CLI::App* parent = &bench;
  return {cmd, [o, parent] {
            // `canopy bench`'s own options reach here through fallthrough; they mean nothing to the lab.
            for (const CLI::Option* opt : parent->get_options())
              if (opt->count() > 0 && opt->get_name() != "--help")
                throw usage_error(opt->get_name(), "is an option of canopy bench (the octree benchmark), not of "
                                                   "canopy bench atomics");
            return run_atomics(*o);
          }};
}

}  // namespace canopy::tool
