// SPDX-License-Identifier: Apache-2.0
// nbody: a Barnes-Hut N-body simulation embedding Canopy. Every step builds the octree of the
// bodies, accumulates its multipoles with Canopy's scheduler (GPU persistent kernel or CPU
// threads), computes accelerations by a tree walk and integrates with leapfrog (kick-drift-kick).
// With --solver fmm the forces come from canopy::fmm instead: the fast multipole method's whole
// evaluation as one task DAG on the same scheduler.
//
// Output: results on stdout (a line per step, the summary, the checks); progress on stderr through
// spdlog. A failure prints one line "nbody: error: ..." on stderr. Exit codes: 0 done (and the
// checks passed), 1 a --check bound was exceeded, 2 bad command line, 3 the run failed,
// 77 --backend gpu without a usable device (ctest skips the GPU test on it).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>
#include <canopy/mode.hpp>
#include <canopy/push_policy.hpp>
#include <canopy/trees/errors.hpp>
#include <canopy/trees/generators.hpp>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "force_backend.hpp"
#include "simulation.hpp"
#if NBODY_HAVE_MPI
#include "distributed_run.hpp"
#endif

namespace {

int fail(int code, const std::string& message) {
  std::fputs(fmt::format("nbody: error: {}\n", message).c_str(), stderr);
  return code;
}

// "20000", "20k", "1M", "1.5M" (suffixes k, M, G are powers of 1000).
std::size_t parse_count(const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw std::invalid_argument("--n: '" + text + "' is not a count");
  }
  std::string suffix = text.substr(used);
  double scale = 1;
  if (suffix == "k" || suffix == "K") scale = 1e3;
  else if (suffix == "M" || suffix == "m") scale = 1e6;
  else if (suffix == "G" || suffix == "g") scale = 1e9;
  else if (!suffix.empty()) throw std::invalid_argument("--n: '" + text + "' is not a count (suffixes k, M, G)");
  v *= scale;
  if (!(v >= 0) || v > 4e18 || v != static_cast<double>(static_cast<std::uint64_t>(v)))
    throw std::invalid_argument("--n: '" + text + "' is not a whole non-negative count");
  return static_cast<std::size_t>(v);
}

// This process's rank as the launcher's environment gives it before MPI starts (Open MPI, MPICH,
// PMIx); 0 when none does.
[[maybe_unused]] int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    const char* value = std::getenv(name);
    if (value != nullptr) return std::atoi(value);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Barnes-Hut N-body simulation on Canopy: each step builds the octree, accumulates multipoles with\n"
      "the Canopy scheduler, walks the tree for accelerations (monopole + quadrupole, opening angle\n"
      "theta, Plummer softening) and integrates with leapfrog. Prints a per-step time breakdown.",
      "nbody"};
  app.footer(
      "Exit codes: 0 done (checks passed), 1 a --check bound exceeded, 2 bad command line,\n"
      "            3 the run failed, 77 --backend gpu without a usable CUDA device.");
  nbody::sim_options o;
  std::string n_text = "20000", dist = "plummer", mode = std::string(canopy::to_string(o.mode)), log_level = "info";
  bool monopole = false;
  app.add_option("-n,--n", n_text, "number of bodies (suffixes k, M, G)")->capture_default_str();
  app.add_option("--steps", o.steps, "time steps")->capture_default_str();
  app.add_option("--diag-every", o.diag_every,
                 "gpu: the energy every K steps and at the last (its only copy to the host); 0 = the last step only")
      ->capture_default_str();
  app.add_option("--dt", o.dt, "time step (units G = 1, total mass 1)")->capture_default_str();
  app.add_option("--theta", o.theta, "opening angle (bh), or the FMM's opening parameter (fmm, in (0, 1])")
      ->capture_default_str();
  app.add_option("--solver", o.solver, "forces by the Barnes-Hut walk (bh) or the fast multipole method (fmm)")
      ->check(CLI::IsMember({"bh", "fmm"}))
      ->capture_default_str();
  app.add_option("--fmm-schedule", o.fmm_schedule,
                 fmt::format("fmm on the GPU: the evaluation level by level in a CUDA graph (graph) or as one task DAG in "
                             "the persistent kernel (dag); default {}", nbody::default_fmm_schedule))
      ->check(CLI::IsMember({"graph", "dag"}));
  app.add_option("--order", o.order,
                 fmt::format("fmm: expansion order ({}..{} on the CPU; on the GPU {})", nbody::min_fmm_order,
                             nbody::max_fmm_order,
                             nbody::gpu_backend_built() ? nbody::gpu_fmm_orders() : std::string("not built")))
      ->capture_default_str();
  app.add_option("--softening", o.softening, "Plummer softening length")->capture_default_str();
  app.add_option("--backend", o.backend, "cpu, gpu, or auto (gpu when a device is usable)")->capture_default_str();
  // The mode names come from the library, so a new mode needs nothing here.
  std::string mode_names;
  for (const canopy::mode m : canopy::all_modes) mode_names += (mode_names.empty() ? "" : ", ") + std::string(canopy::to_string(m));
  app.add_option("--mode", mode, "scheduler mode (" + mode_names + ")")->capture_default_str();
  app.add_option("--dist", dist, "initial bodies: plummer (in equilibrium), uniform or clusters (both at rest)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the initial conditions")->capture_default_str();
  app.add_option("--max-leaf", o.max_leaf, "most bodies in an octree leaf")->capture_default_str();
  app.add_option("--threads", o.threads, "host threads (builder, CPU backend, integrator); 0 = all cores")
      ->capture_default_str();
  app.add_flag("--monopole", monopole, "monopole only (no quadrupole): shows what the quadrupole buys; fails --check");
  app.add_flag("--check", o.check, "check accelerations against direct summation and the energy drift");
  app.add_option("--check-sample", o.check_sample, "bodies compared with direct summation (0 = all)")->capture_default_str();
  app.add_option("--max-p50", o.max_p50, "bound on the median relative acceleration error at theta 0.5")
      ->capture_default_str();
  app.add_option("--max-p99", o.max_p99, "bound on the 99th percentile relative acceleration error at theta 0.5")
      ->capture_default_str();
  app.add_option("--max-drift", o.max_drift, "bound on |E_end - E_0| / |E_0|")->capture_default_str();
  bool distributed = false;
  app.add_flag("--distributed", distributed,
               "run across MPI ranks (each owns its domain's bodies); implied when mpiexec started this process");
  app.add_option("--balance", o.balance, "distributed: cut the ranks' ranges by body count or by last step's work")
      ->capture_default_str();
  app.add_option("--start-rank", o.start_rank, "distributed: the rank holding every body at the start (-1: even slices)")
      ->capture_default_str();
  app.add_flag("--check-single", o.check_single,
               "distributed: compare every body's force with the one-process walk (all bodies gathered on rank 0)");
  app.add_option("--max-single-p99", o.max_single_p99,
                 "distributed: bound on the 99th percentile relative difference from the one-process forces")
      ->capture_default_str();
  app.add_option("--fail-rank", o.fail_rank, "distributed, a test aid: this rank's walk fails at step 1")
      ->capture_default_str();
  app.add_option("--gpu-step", o.gpu_step,
                 "distributed on GPUs: the whole step on them with NCCL between them (whole; one GPU a rank), only the "
                 "walk on the GPU and the rest on host threads (walk), or whole where the run allows it (auto)")
      ->check(CLI::IsMember({"auto", "whole", "walk"}))
      ->capture_default_str();
  app.add_option("--log-level", log_level, "progress on stderr")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    return fail(nbody::exit_bad_input, std::string(e.what()) + " (see --help)");
  }

  auto logger = spdlog::stderr_logger_st("nbody");
  logger->set_pattern("nbody: %l: %v");
  logger->set_level(spdlog::level::from_str(log_level));
  spdlog::set_default_logger(logger);

  try {
    o.n = parse_count(n_text);
    const std::string dist_error = "--dist must be plummer, uniform or clusters, not '" + dist + "'";
    try {
      o.dist = canopy::trees::parse_distribution(dist);
    } catch (const std::exception&) {
      throw std::invalid_argument(dist_error);
    }
    if (o.dist == canopy::trees::distribution::lattice) throw std::invalid_argument(dist_error);
    const auto m = canopy::parse_mode(mode);
    if (!m)
      throw std::invalid_argument("--mode: unknown mode '" + mode + "' (" + mode_names + ")");
    o.mode = *m;
    if (o.solver == "fmm") {
      if (app.count("--mode") == 0) o.mode = nbody::default_fmm_mode;
      if (app.count("--max-leaf") == 0) o.max_leaf = nbody::default_fmm_max_leaf;
    }
    o.quadrupole = !monopole;
    if (app.count("--order") > 0 && o.solver != "fmm")
      throw std::invalid_argument("--order applies to --solver fmm only");
    if (app.count("--fmm-schedule") > 0 && o.solver != "fmm")
      throw std::invalid_argument("--fmm-schedule applies to --solver fmm only");
    nbody::validate(o);
  } catch (const std::exception& e) {
    return fail(nbody::exit_bad_input, e.what());
  }
#if NBODY_HAVE_MPI
  if (distributed || nbody::launched_by_mpiexec()) {
    if (o.solver != "bh") {
      // Every rank refuses, before MPI starts; one line in all, from the launcher's rank 0.
      if (launcher_rank() == 0)
        fail(nbody::exit_bad_input,
             "--solver " + o.solver + ": the distributed run (mpiexec) has the Barnes-Hut walk only (--solver bh)");
      return nbody::exit_bad_input;
    }
    if (o.backend == "gpu" && !nbody::gpu_backend_usable())
      return fail(nbody::exit_no_gpu, "--backend gpu: no usable CUDA device, or built without CUDA (use --backend cpu)");
    try {
      return nbody::run_distributed(o, argc, argv);
    } catch (const std::exception& e) {
      return fail(nbody::exit_run_failed, e.what());
    }
  }
#else
  if (distributed) return fail(nbody::exit_bad_input, "--distributed: this nbody was built without MPI");
  // Several copies started by mpiexec would each run the whole simulation.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && std::atoi(value) > 1)
      return fail(nbody::exit_bad_input, fmt::format("started by mpiexec with {} processes, but this nbody was built "
                                                     "without MPI (MPI not found when it was configured)",
                                                     value));
  }
#endif
  if (o.backend == "gpu" && !nbody::gpu_backend_usable())
    return fail(nbody::exit_no_gpu, nbody::gpu_backend_built()
                                        ? "--backend gpu: no usable CUDA device (use --backend cpu)"
                                        : "--backend gpu: this nbody was built without CUDA (CANOPY_GPU=OFF)");

  try {
    return nbody::run_simulation(o);
  } catch (const std::invalid_argument& e) {
    return fail(nbody::exit_bad_input, e.what());
  } catch (const canopy::trees::input_error& e) {
    return fail(nbody::exit_bad_input, e.what());
  } catch (const std::bad_alloc&) {
    return fail(nbody::exit_run_failed, "out of memory");
  } catch (const std::exception& e) {
    return fail(nbody::exit_run_failed, e.what());
  }
}
