// SPDX-License-Identifier: Apache-2.0
// The host side of the N-body example: initial conditions, the leapfrog loop, energy, the
// per-step timing breakdown and the self-checks.
#pragma once

#include <canopy/mode.hpp>
#include <canopy/push_policy.hpp>
#include <canopy/trees/generators.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "resident.hpp"

namespace nbody {

// The FMM's expansion order, leaf size and scheduler mode when --order, --max-leaf and --mode are not
// given: order 5 at theta 0.5 is the cheapest order and opening parameter measured on the GPU
// that is as accurate as the Barnes-Hut walk (bench/RESULTS.md, "The FMM as one task graph").
// Leaves of at most 48 bodies: with the P2P parts and tiles, the N-body step at 1M and 16M bodies
// was 2-8% faster than at 32 (fewer M2L pairs, a cheaper set-up) and 10-40% faster than at 64 (the
// P2P grows faster than the M2L shrinks), at the same accuracy (H200, bench/RESULTS.md, "The
// N-body step with the FMM"); warp-rounds runs the FMM's task DAG with no block barrier.
inline constexpr int default_fmm_order = 5;
// The GPU FMM's schedule without --fmm-schedule: the level graph, 1.5x faster than the task DAG at
// 1M and 64k Plummer bodies once its M2L phase stages the sources in shared memory (H200;
// bench/RESULTS.md, "The FMM as one task graph").
inline constexpr const char* default_fmm_schedule = "graph";
inline constexpr int default_fmm_max_leaf = 48;
inline constexpr canopy::mode default_fmm_mode = canopy::mode::warp_rounds;
// The orders the CPU path evaluates (canopy::fmm::min_order .. max_order); the GPU evaluator's are
// those of gpu_fmm_order_supported (resident.hpp).
inline constexpr int min_fmm_order = 2;
inline constexpr int max_fmm_order = 8;

struct sim_options {
  std::size_t n = 20000;
  int steps = 10;
  int diag_every = 1;  // GPU: energy sums every K steps (and the last); 0 = the last step only
  double dt = 0.005;
  double theta = 0.5;
  double softening = 0.01;
  std::string backend = "auto";  // cpu, gpu, auto
  canopy::mode mode = canopy::mode::continuation;
  canopy::trees::distribution dist = canopy::trees::distribution::plummer;
  std::uint64_t seed = 1;
  int max_leaf = 16;
  unsigned threads = 0;  // host threads for the builder, the CPU backend and the integrator; 0 = all
  bool quadrupole = true;
  // The force solver: "bh" (the Barnes-Hut walk) or "fmm" (canopy::fmm: Cartesian expansions of
  // `order`, opening parameter `theta` in its own criterion r_A + r_B < theta |z_A - z_B|).
  std::string solver = "bh";
  int order = default_fmm_order;
  // How the GPU backend runs the FMM's evaluation: "graph" (its bodies level by level in a CUDA
  // graph, P2P on a parallel branch) or "dag" (one task DAG in Canopy's persistent kernel); empty:
  // default_fmm_schedule. The CPU backend runs the task DAG on the CPU scheduler and takes "dag" only.
  std::string fmm_schedule;

  // --check: accuracy against direct summation and energy drift.
  bool check = false;
  std::size_t check_sample = 2000;  // bodies compared with direct summation (0 = all)
  double max_p50 = 2e-3;            // bounds at theta = 0.5 (see README)
  double max_p99 = 1e-2;
  double max_drift = 1e-3;
  std::size_t direct_energy_limit = 50000;  // direct-summation energies up to this N (else the tree's)

  // Under mpiexec (distributed_run.hpp): how the ranks' ranges are cut ("count" or "work": the
  // previous step's interactions per body), the rank that holds every body at the start (-1: even
  // slices), and the comparison with the one-process walk over all bodies gathered (small N only).
  std::string balance = "count";
  int start_rank = -1;
  bool check_single = false;
  double max_single_p99 = 1e-4;  // bound on the 99th percentile relative difference from it
  int fail_rank = -1;            // a test aid: this rank's walk fails at step 1 (-1: none)
  // With a GPU backend: the whole step on the GPUs, NCCL between them ("whole"; one GPU a rank), only
  // the walk on the GPU and the rest on host threads, MPI between them ("walk"), or whole where the
  // run allows it and walk elsewhere ("auto").
  std::string gpu_step = "auto";
};

// Exit codes of the program.
inline constexpr int exit_ok = 0;
inline constexpr int exit_check_failed = 1;
inline constexpr int exit_bad_input = 2;
inline constexpr int exit_run_failed = 3;
inline constexpr int exit_no_gpu = 77;  // --backend gpu without a usable device (ctest's skip code)

// The initial bodies and velocities of `o` (dist, n, seed): the same on every rank and for every
// rank count.
void initial_conditions(const sim_options& o, std::vector<canopy::trees::point>& pos, std::vector<vec3>& vel);
// Bodies [begin, end) of a distributed run's initial conditions: the positions are those of
// initial_conditions; Plummer velocities are drawn from an engine per chunk of 65,536 bodies (so a
// rank draws only its share) and differ from the one-process draw. momentum = this slice's
// (sum m v, sum m): the caller removes the mean momentum of all ranks.
void initial_slice(const sim_options& o, std::size_t begin, std::size_t end, unsigned threads,
                   std::vector<canopy::trees::point>& pos, std::vector<vec3>& vel, double momentum[4]);

// Nearest-rank percentiles of a sample (the accuracy checks).
struct percentiles {
  double p1 = 0, p50 = 0, p99 = 0, max = 0;
  std::size_t count = 0;
};
percentiles percentiles_of(std::vector<double> v);

// Throws std::invalid_argument with one clear message for bad options.
void validate(const sim_options& o);

// Runs the simulation, prints the per-step lines, the summary and the checks on stdout.
// Returns exit_ok, or exit_check_failed when --check found an error above its bound.
int run_simulation(const sim_options& o);

// The --check line of the energy drift over `steps`: the direct-summation drift where both direct
// energies were computed (`direct`), else the tree potential's, against o.max_drift. Sets `pass`.
// The one-process and the distributed runs report it alike.
std::string energy_check_line(const sim_options& o, int steps, double drift_tree, bool direct, double e0_direct,
                              double e_end_direct, bool& pass);

}  // namespace nbody
