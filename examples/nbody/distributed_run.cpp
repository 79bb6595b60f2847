// SPDX-License-Identifier: Apache-2.0
// The leapfrog loop across MPI ranks: each rank kicks and drifts the bodies it owns, the force
// evaluation is distributed_step (decomposition, migration, build, distributed upward pass,
// essential trees, walk), the energies are all-reduced. The checks are those of the one-process
// run: accelerations of a sample against direct summation (the sample gathered, each rank summing
// its own bodies' pull on it, the sums all-reduced) and the energy drift (direct-summation
// potential over the bodies gathered where N is small). With --check-single, rank 0 also gathers
// every body and compares with the one-process walk over them.
#include "distributed_run.hpp"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <canopy/distributed/mpi_context.hpp>
#include <canopy/distributed/mpi_exchange.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/threads.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "direct.hpp"
#include "distributed_step.hpp"
#include "force_backend.hpp"

namespace nbody {

namespace cd = canopy::distributed;
namespace ct = canopy::trees;

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

struct energy {
  double kinetic = 0, potential = 0;
  double total() const { return kinetic + potential; }
};

// The one-process path's kick and energy sums (the same chunks, so one rank gives its numbers),
// then the sums of all ranks.
energy kick_and_energy(std::vector<dist_body>& bodies, const std::vector<body_force>& f, float half_dt, unsigned threads,
                       cd::exchange& ex) {
  constexpr std::size_t chunk = 1 << 14;
  const std::size_t n = bodies.size();
  std::vector<std::array<double, 2>> partial((n + chunk - 1) / chunk, {0.0, 0.0});
  parallel_for(n, threads, chunk, [&](std::size_t b, std::size_t e) {
    double k = 0, w = 0;
    for (std::size_t i = b; i < e; ++i) {
      vec3& v = bodies[i].v;
      v.x += f[i].ax * half_dt;
      v.y += f[i].ay * half_dt;
      v.z += f[i].az * half_dt;
      k += 0.5 * bodies[i].p.m * (double(v.x) * v.x + double(v.y) * v.y + double(v.z) * v.z);
      w += 0.5 * bodies[i].p.m * double(f[i].phi);
    }
    partial[b / chunk] = {k, w};
  });
  double sums[2] = {0, 0};
  for (const auto& p : partial) {
    sums[0] += p[0];
    sums[1] += p[1];
  }
  ex.all_reduce(sums, 2, cd::element_type::f64, cd::reduce_op::sum);
  return energy{sums[0], sums[1]};
}

void kick_drift(std::vector<dist_body>& bodies, const std::vector<body_force>& f, float half_dt, float dt, unsigned threads) {
  parallel_for(bodies.size(), threads, 1 << 14, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      vec3& v = bodies[i].v;
      ct::point& p = bodies[i].p;
      v.x += f[i].ax * half_dt;
      v.y += f[i].ay * half_dt;
      v.z += f[i].az * half_dt;
      p.x += v.x * dt;
      p.y += v.y * dt;
      p.z += v.z * dt;
    }
  });
}

void require_finite(const std::vector<body_force>& f, int step) {
  for (std::size_t i = 0; i < f.size(); ++i)
    if (!std::isfinite(f[i].ax) || !std::isfinite(f[i].ay) || !std::isfinite(f[i].az) || !std::isfinite(f[i].phi))
      throw std::runtime_error(fmt::format("step {}: non-finite force on body {} (coincident bodies with softening 0?)",
                                           step, i));
}

// The bodies of all ranks on every rank, in rank order (= the global Morton order). Checks only.
template <class T>
std::vector<T> gather_all(const cd::mpi_context& ctx, cd::exchange& ex, const std::vector<T>& mine) {
  const std::vector<std::uint64_t> counts64 = ctx.all_gather(mine.size());
  const std::vector<std::size_t> counts(counts64.begin(), counts64.end());
  std::vector<T> all(std::accumulate(counts.begin(), counts.end(), std::size_t{0}));
  cd::all_gather_v(ex, mine.data(), all.data(), counts);
  return all;
}

// The phases of one step on this rank, and their min and max over ranks.
constexpr int phase_count = 9;
constexpr const char* phase_names[phase_count] = {"wait",     "decompose", "migrate", "build",    "upward",
                                                  "top tree", "essential", "walk",    "integrate"};

std::array<double, phase_count> as_array(const dist_phase_times& t, double integrate) {
  return {t.wait, t.decompose, t.migrate, t.build, t.upward, t.top, t.let, t.walk, integrate};
}

struct spread {
  std::array<double, phase_count + 1> min{}, max{};  // the phases, then the step
};

spread spread_of(cd::exchange& ex, const std::array<double, phase_count>& mine) {
  spread s;
  for (int k = 0; k < phase_count; ++k) s.min[k] = s.max[k] = mine[k];
  s.min[phase_count] = s.max[phase_count] = std::accumulate(mine.begin(), mine.end(), 0.0);
  ex.all_reduce(s.min.data(), s.min.size(), cd::element_type::f64, cd::reduce_op::min);
  ex.all_reduce(s.max.data(), s.max.size(), cd::element_type::f64, cd::reduce_op::max);
  return s;
}

// A sampled body for the accuracy check: where it is, who it is, its tree force.
struct sample_body {
  ct::point p;
  body_force f;
  std::uint64_t id;
};

class dist_checker {
 public:
  dist_checker(const sim_options& o, const cd::mpi_context& ctx, cd::exchange& ex, unsigned threads)
      : o_(o), ctx_(ctx), ex_(ex), threads_(threads) {}

  // The accuracy check: the bodies at global Morton positions k N / s (as the one-process check
  // picks them), their direct-summation forces summed over every rank's bodies.
  void accuracy(distributed_step& step, std::vector<dist_body>& bodies, const std::vector<body_force>& run_forces,
                const walk_params& wp, const char* when) {
    const std::vector<std::uint64_t> counts = ctx_.all_gather(bodies.size());
    std::uint64_t n = 0, offset = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      if (static_cast<int>(r) == ctx_.rank()) offset = n;
      n += counts[r];
    }
    const std::uint64_t s = (o_.check_sample == 0 || o_.check_sample >= n) ? n : o_.check_sample;
    // Mine: the k with offset <= k N / s < offset + count.
    std::vector<std::size_t> local;
    for (std::uint64_t k = 0; k < s; ++k) {
      const std::uint64_t g = k * n / s;
      if (g >= offset && g < offset + bodies.size()) local.push_back(static_cast<std::size_t>(g - offset));
    }
    auto gather_sample = [&](const std::vector<body_force>& f) {
      std::vector<sample_body> mine(local.size());
      for (std::size_t k = 0; k < local.size(); ++k) mine[k] = sample_body{bodies[local[k]].p, f[local[k]], bodies[local[k]].id};
      return gather_all(ctx_, ex_, mine);
    };
    const std::vector<sample_body> sample = gather_sample(run_forces);

    // Each rank's bodies' pull on every sampled body, in double, then summed over ranks.
    const auto t0 = clock_type::now();
    const double eps2 = o_.softening * o_.softening;
    std::vector<double> exact(4 * sample.size(), 0.0);
    parallel_for(sample.size(), threads_, 16, [&](std::size_t b, std::size_t e) {
      for (std::size_t k = b; k < e; ++k) {
        const double x = sample[k].p.x, y = sample[k].p.y, z = sample[k].p.z;
        double ax = 0, ay = 0, az = 0, phi = 0;
        for (const dist_body& q : bodies) {
          if (q.id == sample[k].id) continue;
          const double dx = q.p.x - x, dy = q.p.y - y, dz = q.p.z - z;
          const double inv_r = 1.0 / std::sqrt(dx * dx + dy * dy + dz * dz + eps2);
          const double w = q.p.m * inv_r * inv_r * inv_r;
          ax += w * dx;
          ay += w * dy;
          az += w * dz;
          phi -= q.p.m * inv_r;
        }
        exact[4 * k] = ax;
        exact[4 * k + 1] = ay;
        exact[4 * k + 2] = az;
        exact[4 * k + 3] = phi;
      }
    });
    ex_.all_reduce(exact.data(), exact.size(), cd::element_type::f64, cd::reduce_op::sum);
    const double direct_ms = ms_since(t0);

    std::vector<float> thetas = {0.5f};
    if (wp.theta != 0.5f) thetas.push_back(wp.theta);
    for (const float th : thetas) {
      std::vector<sample_body> at = sample;
      if (th != wp.theta) {
        // The same decomposition walked at theta 0.5 (collective: every rank takes this branch).
        walk_params p = wp;
        p.theta = th;
        std::vector<body_force> f;
        dist_phase_times unused;
        step.forces(bodies, p, f, unused, false);
        at = gather_sample(f);
      }
      std::vector<double> rel(at.size());
      for (std::size_t k = 0; k < at.size(); ++k) {
        const body_force& a = at[k].f;
        const double ex = a.ax - exact[4 * k], ey = a.ay - exact[4 * k + 1], ez = a.az - exact[4 * k + 2];
        const double norm = std::sqrt(exact[4 * k] * exact[4 * k] + exact[4 * k + 1] * exact[4 * k + 1] +
                                      exact[4 * k + 2] * exact[4 * k + 2]);
        const double err = std::sqrt(ex * ex + ey * ey + ez * ez);
        rel[k] = norm > 0 ? err / norm : (err > 0 ? std::numeric_limits<double>::infinity() : 0.0);
        if (!std::isfinite(a.ax) || !std::isfinite(a.ay) || !std::isfinite(a.az)) rel[k] = std::numeric_limits<double>::infinity();
      }
      const percentiles pc = percentiles_of(std::move(rel));
      const bool bounded = th == 0.5f;
      const bool pass = !bounded || (pc.p50 <= o_.max_p50 && pc.p99 <= o_.max_p99);
      failed_ = failed_ || !pass;
      lines_.push_back(fmt::format(
          "accuracy  {:<6} theta {:.2f}{}: |a_tree - a_direct| / |a_direct| over {} bodies: p1 {:.2e}  p50 {:.2e}  "
          "p99 {:.2e}  max {:.2e}{}",
          when, th, o_.quadrupole ? "" : " (monopole only)", pc.count, pc.p1, pc.p50, pc.p99, pc.max,
          bounded ? fmt::format("  (bounds p50 <= {:.0e}, p99 <= {:.0e}) {}", o_.max_p50, o_.max_p99, pass ? "PASS" : "FAIL")
                  : std::string("  (reported only; the bounds are for theta 0.50)")));
    }
    spdlog::info("accuracy check {}: direct summation for {} bodies against {} on {} ranks ({:.1f} ms)", when, sample.size(), n,
                 ctx_.size(), direct_ms);
  }

  // Every body's force against the one-process CPU path over all bodies gathered on rank 0 (the
  // same octree: the global cube is the bounding cube of all bodies).
  // `bounded` false: the GPU walk's group criterion is stricter than walk_one's, so its forces
  // differ from the CPU walk's by about its own error; reported only.
  void against_single(const std::vector<dist_body>& bodies, const std::vector<body_force>& forces, const walk_params& wp,
                      const canopy::scheduler_options& sopt, bool bounded, const char* when) {
    std::vector<sample_body> mine(bodies.size());
    for (std::size_t i = 0; i < bodies.size(); ++i) mine[i] = sample_body{bodies[i].p, forces[i], bodies[i].id};
    const std::vector<sample_body> all = gather_all(ctx_, ex_, mine);
    if (ctx_.rank() != 0) return;
    std::vector<ct::point> pts(all.size());
    for (std::size_t i = 0; i < all.size(); ++i) pts[i] = all[i].p;
    ct::build_options bo;
    bo.max_leaf = o_.max_leaf;
    const ct::octree tree = ct::build_octree(pts, bo);
    for (std::size_t i = 0; i < pts.size(); ++i)
      if (tree.points[i].x != pts[i].x || tree.points[i].y != pts[i].y || tree.points[i].z != pts[i].z)
        throw std::logic_error("--check-single: the ranks' bodies in rank order are not the one-process octree's order");
    std::vector<body_force> f(pts.size());
    force_times unused;
    make_cpu_backend(sopt, threads_)->compute(tree, wp, f, unused);
    std::vector<double> rel(all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
      const double ex = all[i].f.ax - f[i].ax, ey = all[i].f.ay - f[i].ay, ez = all[i].f.az - f[i].az;
      const double norm = std::sqrt(double(f[i].ax) * f[i].ax + double(f[i].ay) * f[i].ay + double(f[i].az) * f[i].az);
      rel[i] = norm > 0 ? std::sqrt(ex * ex + ey * ey + ez * ez) / norm : 0.0;
      if (!std::isfinite(rel[i])) rel[i] = std::numeric_limits<double>::infinity();
    }
    const percentiles pc = percentiles_of(std::move(rel));
    const bool pass = !bounded || pc.p99 <= o_.max_single_p99;
    failed_ = failed_ || !pass;
    lines_.push_back(fmt::format("one rank  {:<6} |a_ranks - a_one_process| / |a_one_process| over {} bodies: p50 {:.2e}  "
                                 "p99 {:.2e}  max {:.2e}  {}",
                                 when, pc.count, pc.p50, pc.p99, pc.max,
                                 bounded ? fmt::format("(bound p99 <= {:.0e}) {}", o_.max_single_p99, pass ? "PASS" : "FAIL")
                                         : std::string("(GPU walk against the CPU walk: reported only)")));
  }

  bool direct_energy() const { return o_.check && o_.n <= o_.direct_energy_limit; }
  // Kinetic (all-reduced) + direct potential of all bodies gathered (rank 0's value; others 0).
  double direct_total(const std::vector<dist_body>& bodies) {
    double k = 0;
    for (const dist_body& b : bodies)
      k += 0.5 * b.p.m * (double(b.v.x) * b.v.x + double(b.v.y) * b.v.y + double(b.v.z) * b.v.z);
    ex_.all_reduce(&k, 1, cd::element_type::f64, cd::reduce_op::sum);
    std::vector<ct::point> mine(bodies.size());
    for (std::size_t i = 0; i < bodies.size(); ++i) mine[i] = bodies[i].p;
    const std::vector<ct::point> all = gather_all(ctx_, ex_, mine);
    return ctx_.rank() == 0 ? k + direct_potential_energy(all, o_.softening * o_.softening, threads_) : 0.0;
  }

  std::string finish(const energy& e0_tree, const energy& e_tree, double e0_direct, double e_end_direct, int steps) {
    const double drift_tree = std::abs(e_tree.total() - e0_tree.total()) / std::abs(e0_tree.total());
    std::string out;
    if (!o_.check && lines_.empty())
      return fmt::format("energy    |E_end - E_0| / |E_0| over {} steps: {:.2e} (tree potential; --check for the bounds)\n",
                         steps, drift_tree);
    if (o_.check) {
      bool pass = false;
      lines_.push_back(energy_check_line(o_, steps, drift_tree, direct_energy(), e0_direct, e_end_direct, pass));
      failed_ = failed_ || !pass;
    }
    for (const auto& l : lines_) out += "check     " + l + "\n";
    out += fmt::format("result    {}\n", failed_ ? "FAIL" : "PASS");
    return out;
  }
  bool failed() const { return failed_; }

 private:
  const sim_options& o_;
  const cd::mpi_context& ctx_;
  cd::exchange& ex_;
  unsigned threads_;
  bool failed_ = false;
  std::vector<std::string> lines_;
};

// This rank's place among the ranks of its host: (its index, their number).
std::pair<int, int> host_local_rank() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int index = 0, local = 1;
  MPI_Comm_rank(node, &index);
  MPI_Comm_size(node, &local);
  MPI_Comm_free(&node);
  return {index, local};
}

// Host threads per rank: the cores of this host shared by its ranks, unless --threads says.
unsigned threads_per_rank(unsigned requested, int local_ranks) {
  if (requested != 0) return requested;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max(1u, cores / static_cast<unsigned>(std::max(1, local_ranks)));
}

void print_header() {
  std::string h = fmt::format("{:>5} {:>9} |", "step", "time");
  for (const char* name : phase_names) h += fmt::format(" {:>10}", name);
  h += fmt::format(" | {:>9} | {:>15} {:>10}\n", "step ms", "energy", "dE/|E0|");
  std::fputs(h.c_str(), stdout);
}

int run(const sim_options& o, const cd::mpi_context& ctx, cd::exchange& ex) {
  const bool root = ctx.rank() == 0;
  const auto [local_rank, local_ranks] = host_local_rank();
  const unsigned threads = threads_per_rank(o.threads, local_ranks);
  const bool use_gpu = o.backend == "gpu" || (o.backend == "auto" && gpu_backend_usable());
  ct::set_host_threads(threads);
  canopy::scheduler_options sopt;
  sopt.mode = o.mode;
  sopt.blocks = static_cast<int>(threads);
  ctx.phase("options", [&] {
    if (o.start_rank >= ctx.size())
      throw std::invalid_argument(fmt::format("--start-rank {} is not a rank of this run ({} ranks)", o.start_rank, ctx.size()));
  });

  // The same initial conditions as one process; this rank keeps its slice (or all, or none, with
  // --start-rank): the decomposition moves them to their owners.
  auto t0 = clock_type::now();
  std::vector<dist_body> bodies;
  {
    std::vector<ct::point> pos;
    std::vector<vec3> vel;
    initial_conditions(o, pos, vel);
    const auto ranks = static_cast<std::size_t>(ctx.size()), rank = static_cast<std::size_t>(ctx.rank());
    std::size_t b = rank * o.n / ranks, e = (rank + 1) * o.n / ranks;
    if (o.start_rank >= 0) {
      b = o.start_rank == ctx.rank() ? 0 : o.n;
      e = o.start_rank == ctx.rank() ? o.n : o.n;
    }
    bodies.reserve(e - b);
    for (std::size_t i = b; i < e; ++i) bodies.push_back(dist_body{pos[i], vel[i], 0.0f, i});
  }
  spdlog::info("{} bodies, {} ({}), seed {}, on {} ranks, {} threads each ({:.1f} ms)", o.n, ct::to_string(o.dist),
               o.dist == ct::distribution::plummer ? "equilibrium velocities" : "at rest", o.seed, ctx.size(), threads,
               ms_since(t0));

  walk_params wp;
  wp.theta = static_cast<float>(o.theta);
  wp.eps2 = static_cast<float>(o.softening * o.softening);
  wp.quadrupole = o.quadrupole;
  const balance_by balance = o.balance == "work" ? balance_by::work : balance_by::count;
  distributed_step step(ctx, ex, o.max_leaf, balance, sopt, threads);
  // The GPU walk: one device per rank of a host (local rank modulo the devices).
  std::unique_ptr<gpu_walker> walker;
  ctx.phase("device", [&] {
    if (use_gpu) walker = make_gpu_walker(local_rank);
  });
  step.set_gpu_walker(walker.get());
  if (walker) spdlog::info("rank 0 walks on {}", walker->describe());
  const float dt = static_cast<float>(o.dt), half_dt = 0.5f * dt;
  std::vector<body_force> forces;

  // Step 0: the initial forces (also the warm-up). Not in the summary.
  dist_phase_times pt;
  t0 = clock_type::now();
  step.rebuild(bodies, pt);
  step.forces(bodies, wp, forces, pt, true);
  ctx.phase("forces", [&] { require_finite(forces, 0); });
  spdlog::info("initial step: global tree {} nodes, {} leaves; {:.1f} ms on rank 0", step.tree().top.node_count(),
               step.tree().top.leaves.size(), ms_since(t0));
  const energy e0 = kick_and_energy(bodies, forces, 0.0f, threads, ex);

  dist_checker check(o, ctx, ex, threads);
  const double e0_direct = check.direct_energy() ? check.direct_total(bodies) : 0.0;
  if (o.check) check.accuracy(step, bodies, forces, wp, "start");
  if (o.check_single) check.against_single(bodies, forces, wp, sopt, !walker, "start");

  if (root) print_header();
  std::vector<std::array<double, phase_count>> mine_per_step;
  std::vector<spread> spreads;
  energy e = e0;
  step.fail_walk(ctx.rank() == o.fail_rank);
  for (int s = 1; s <= o.steps; ++s) {
    t0 = clock_type::now();
    kick_drift(bodies, forces, half_dt, dt, threads);
    double integrate = ms_since(t0);
    step.rebuild(bodies, pt);
    step.forces(bodies, wp, forces, pt, true);
    ctx.phase("forces", [&] { require_finite(forces, s); });
    t0 = clock_type::now();
    e = kick_and_energy(bodies, forces, half_dt, threads, ex);
    integrate += ms_since(t0);
    const auto mine = as_array(pt, integrate);
    mine_per_step.push_back(mine);
    const spread sp = spread_of(ex, mine);
    spreads.push_back(sp);
    if (root) {
      std::string line = fmt::format("{:>5} {:>9.4f} |", s, s * o.dt);
      for (int k = 0; k < phase_count; ++k) line += fmt::format(" {:>10.3f}", sp.max[k]);
      line += fmt::format(" | {:>9.3f} | {:>15.8e} {:>+10.2e}\n", sp.max[phase_count], e.total(),
                          (e.total() - e0.total()) / std::abs(e0.total()));
      std::fputs(line.c_str(), stdout);
      std::fflush(stdout);
    }
  }

  // Per rank: the mean of each phase over the steps; then min and max over ranks.
  std::array<double, phase_count> mean{};
  for (const auto& m : mine_per_step)
    for (int k = 0; k < phase_count; ++k) mean[k] += m[k] / static_cast<double>(mine_per_step.size());
  const spread over = spread_of(ex, mean);
  const std::vector<std::uint64_t> held = ctx.all_gather(bodies.size());
  const let_stats& ls = step.last_let();
  const std::vector<std::uint64_t> let_nodes = ctx.all_gather(ls.nodes_received);
  const std::vector<std::uint64_t> let_bodies = ctx.all_gather(ls.bodies_received);
  std::string out;
  if (root) {
    out += fmt::format("\nsummary   {} bodies, {} steps of dt {}, theta {}, softening {}, {} per leaf at most, {}\n", o.n,
                       o.steps, o.dt, o.theta, o.softening, o.max_leaf,
                       o.quadrupole ? "monopole + quadrupole" : "monopole only");
    out += fmt::format("backend   {}, {} ranks (mpi exchange), {} threads per rank, mode {}, balance by {}\n",
                       walker ? "gpu walk (" + walker->describe() + " on rank 0), the rest on host threads" : std::string("cpu"),
                       ctx.size(), threads, canopy::to_string(o.mode), o.balance);
    out += fmt::format("ranks     last step: bodies per rank min {} max {}; global tree {} nodes, {} leaves\n",
                       *std::min_element(held.begin(), held.end()), *std::max_element(held.begin(), held.end()),
                       step.tree().top.node_count(), step.tree().top.leaves.size());
    out += fmt::format("essential last step, received per rank: nodes min {} max {}, bodies min {} max {}\n",
                       *std::min_element(let_nodes.begin(), let_nodes.end()),
                       *std::max_element(let_nodes.begin(), let_nodes.end()),
                       *std::min_element(let_bodies.begin(), let_bodies.end()),
                       *std::max_element(let_bodies.begin(), let_bodies.end()));
    out += fmt::format("{:<12} {:>12} {:>12}   (each rank's mean ms per step; min and max over ranks)\n", "phase", "min ms",
                       "max ms");
    for (int k = 0; k <= phase_count; ++k)
      out += fmt::format("{:<12} {:>12.3f} {:>12.3f}\n", k < phase_count ? phase_names[k] : "step", over.min[k], over.max[k]);
  }
  if (o.check) check.accuracy(step, bodies, forces, wp, "end");
  if (o.check_single) check.against_single(bodies, forces, wp, sopt, !walker, "end");
  const double e_end_direct = check.direct_energy() ? check.direct_total(bodies) : 0.0;
  if (root) {
    out += check.finish(e0, e, e0_direct, e_end_direct, o.steps);
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }
  // Rank 0 holds the verdict of the checks that ran there; every rank exits with it.
  int failed = root && check.failed() ? 1 : 0;
  MPI_Bcast(&failed, 1, MPI_INT, 0, ctx.comm());
  return failed ? exit_check_failed : exit_ok;
}

}  // namespace

#if !NBODY_HAVE_GPU
std::unique_ptr<gpu_walker> make_gpu_walker(int) {
  throw std::runtime_error("--backend gpu: this nbody was built without CUDA (CANOPY_GPU=OFF)");
}
#endif

bool distributed_built() { return true; }

bool launched_by_mpiexec() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

int run_distributed(const sim_options& o, int& argc, char**& argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) spdlog::set_level(spdlog::level::warn);  // progress from rank 0 only
  int code = exit_run_failed;
  try {
    const cd::mpi_context ctx(MPI_COMM_WORLD);
    cd::mpi_exchange ex(MPI_COMM_WORLD);
    try {
      code = run(o, ctx, ex);
    } catch (const cd::distributed_error& e) {
      // Every rank holds the same error: one line, from rank 0.
      if (rank == 0) std::fputs(fmt::format("nbody: error: {}\n", e.what()).c_str(), stderr);
      code = exit_run_failed;
    }
  } catch (const std::exception& e) {
    // A failure outside an agreed phase: the other ranks may be waiting in a collective.
    std::fputs(fmt::format("nbody: error: rank {}: {}\n", rank, e.what()).c_str(), stderr);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_run_failed);
  }
  MPI_Finalize();
  return code;
}

}  // namespace nbody
