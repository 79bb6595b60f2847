// SPDX-License-Identifier: Apache-2.0
// The simulation loop, on one of two paths:
//   cpu  every step on the host: kick-drift (host threads), the octree built by trees::build_octree
//        and the bodies reordered to match, the task graph and scheduler (setup), the upward pass
//        on canopy::cpu_scheduler (accumulate), the Barnes-Hut walk on host threads (forces), the
//        second kick and the energy (integrate);
//   gpu  every step on the device, bodies resident (resident.hpp): kick-drift, the octree built by
//        trees::device_octree_builder, the task graph built from the device tree, the upward pass
//        in Canopy's persistent kernel, the group walk, the second kick and, every --diag-every
//        steps, the energy; one stream, no copy to the host but the energy sums.
// Both are leapfrog kick-drift-kick, so positions and velocities are synchronised at the end of a
// step; both print the same per-step line, summary and checks.
#include "simulation.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <canopy/trees/generators.hpp>
#include <canopy/trees/morton.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/threads.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "direct.hpp"
#include "force_backend.hpp"
#include "resident.hpp"

namespace nbody {

namespace ct = canopy::trees;

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

// ---- initial conditions -----------------------------------------------------------------------

double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Plummer velocities in equilibrium with the Plummer positions of trees::generate_plummer (G = M =
// a = 1): speed q v_esc(r), v_esc = sqrt(2) (1 + r^2)^(-1/4), q drawn from q^2 (1 - q^2)^(7/2) by
// rejection (Aarseth, Henon & Wielen 1974), isotropic direction. Then the mean velocity is removed.
vec3 plummer_velocity(const ct::point& p, std::mt19937_64& rng) {
  const double r2 = double(p.x) * p.x + double(p.y) * p.y + double(p.z) * p.z;
  double q = 0;
  for (;;) {
    q = uniform01(rng);
    const double g = q * q * std::pow(1.0 - q * q, 3.5);
    if (0.1 * uniform01(rng) < g) break;
  }
  const double speed = q * std::sqrt(2.0) * std::pow(1.0 + r2, -0.25);
  const double cz = 2.0 * uniform01(rng) - 1.0;
  const double phi = 2.0 * 3.141592653589793 * uniform01(rng);
  const double sz = std::sqrt(std::max(0.0, 1.0 - cz * cz));
  return vec3{float(speed * sz * std::cos(phi)), float(speed * sz * std::sin(phi)), float(speed * cz)};
}

std::vector<vec3> plummer_velocities(const std::vector<ct::point>& pos, std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::vector<vec3> vel(pos.size());
  double mx = 0, my = 0, mz = 0, mt = 0;
  for (std::size_t i = 0; i < pos.size(); ++i) {
    vel[i] = plummer_velocity(pos[i], rng);
    mx += pos[i].m * double(vel[i].x);
    my += pos[i].m * double(vel[i].y);
    mz += pos[i].m * double(vel[i].z);
    mt += pos[i].m;
  }
  if (mt > 0)
    for (auto& v : vel) v = vec3{float(v.x - mx / mt), float(v.y - my / mt), float(v.z - mz / mt)};
  return vel;
}

// ---- build + reorder ----------------------------------------------------------------------------

// build_octree sorts the bodies by Morton code but does not return the permutation; the velocities
// must follow their bodies. The codes of the root cube are recomputed and sorted the same way
// (stable: ties keep input order), which is exactly the builder's order, and checked bit for bit.
struct built {
  ct::octree tree;
  double reorder_ms = 0;
};

built build_and_reorder(std::vector<ct::point>& pos, std::vector<vec3>& vel, int max_leaf, unsigned threads) {
  built b;
  b.tree = ct::build_octree(pos, ct::build_options{max_leaf, ct::max_octree_depth});
  const auto t0 = clock_type::now();
  const std::size_t n = pos.size();
  const ct::morton_grid grid = ct::make_morton_grid(b.tree.bounds[0]);
  struct keyed {
    std::uint64_t code;
    std::uint32_t index;
  };
  std::vector<keyed> order(n);
  parallel_for(n, threads, 1 << 16, [&](std::size_t s, std::size_t e) {
    for (std::size_t i = s; i < e; ++i) order[i] = keyed{ct::morton_code(pos[i], grid), static_cast<std::uint32_t>(i)};
  });
  // The previous step left the bodies in Morton order, so this input is nearly sorted. Stable
  // sort in parallel: chunks sorted on their own, then merged pairwise (std::merge takes the left
  // range first on ties, so the result is the stable order whatever the thread count).
  const auto by_code = [](const keyed& a, const keyed& c) { return a.code < c.code; };
  const std::size_t parts = std::max<std::size_t>(1, std::min<std::size_t>(threads, n / 65536));
  std::vector<std::size_t> bound(parts + 1);
  for (std::size_t p = 0; p <= parts; ++p) bound[p] = p * n / parts;
  parallel_for(parts, threads, 1, [&](std::size_t pb, std::size_t pe) {
    for (std::size_t p = pb; p < pe; ++p)
      std::stable_sort(order.begin() + bound[p], order.begin() + bound[p + 1], by_code);
  });
  std::vector<keyed> scratch(parts > 1 ? n : 0);
  for (std::size_t width = 1; width < parts; width *= 2) {
    const std::size_t pairs = (parts + 2 * width - 1) / (2 * width);
    parallel_for(pairs, threads, 1, [&](std::size_t qb, std::size_t qe) {
      for (std::size_t q = qb; q < qe; ++q) {
        const std::size_t lo = bound[2 * width * q], mid = bound[std::min(parts, 2 * width * q + width)],
                          hi = bound[std::min(parts, 2 * width * (q + 1))];
        std::merge(order.begin() + lo, order.begin() + mid, order.begin() + mid, order.begin() + hi,
                   scratch.begin() + lo, by_code);
      }
    });
    order.swap(scratch);
  }
  std::vector<vec3> new_vel(n);
  bool same = true;
  for (std::size_t k = 0; k < n; ++k) {
    const ct::point& p = pos[order[k].index];
    const ct::point& q = b.tree.points[k];
    same = same && p.x == q.x && p.y == q.y && p.z == q.z && p.m == q.m;
    new_vel[k] = vel[order[k].index];
  }
  if (!same) throw std::logic_error("body reorder disagrees with the octree's point order");
  vel.swap(new_vel);
  pos = b.tree.points;
  b.reorder_ms = ms_since(t0);
  return b;
}

// ---- energy -------------------------------------------------------------------------------------

struct energy {
  double kinetic = 0, potential = 0;
  double total() const { return kinetic + potential; }
};

// Kick v += a * half_dt (half_dt may be 0), then the energy with the tree's potentials.
energy kick_and_energy(std::vector<vec3>& vel, const std::vector<ct::point>& pos, const std::vector<body_force>& f,
                       float half_dt, unsigned threads) {
  constexpr std::size_t chunk = 1 << 14;
  const std::size_t n = vel.size();
  std::vector<std::array<double, 2>> partial((n + chunk - 1) / chunk, {0.0, 0.0});
  parallel_for(n, threads, chunk, [&](std::size_t b, std::size_t e) {
    double k = 0, w = 0;
    for (std::size_t i = b; i < e; ++i) {
      vec3& v = vel[i];
      v.x += f[i].ax * half_dt;
      v.y += f[i].ay * half_dt;
      v.z += f[i].az * half_dt;
      k += 0.5 * pos[i].m * (double(v.x) * v.x + double(v.y) * v.y + double(v.z) * v.z);
      w += 0.5 * pos[i].m * double(f[i].phi);
    }
    partial[b / chunk] = {k, w};
  });
  energy en;
  for (const auto& p : partial) {
    en.kinetic += p[0];
    en.potential += p[1];
  }
  return en;
}

double kinetic_energy(const std::vector<vec3>& vel, const std::vector<ct::point>& pos) {
  double k = 0;
  for (std::size_t i = 0; i < vel.size(); ++i)
    k += 0.5 * pos[i].m * (double(vel[i].x) * vel[i].x + double(vel[i].y) * vel[i].y + double(vel[i].z) * vel[i].z);
  return k;
}

void kick_drift(std::vector<vec3>& vel, std::vector<ct::point>& pos, const std::vector<body_force>& f, float half_dt,
                float dt, unsigned threads) {
  parallel_for(vel.size(), threads, 1 << 14, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      vec3& v = vel[i];
      v.x += f[i].ax * half_dt;
      v.y += f[i].ay * half_dt;
      v.z += f[i].az * half_dt;
      pos[i].x += v.x * dt;
      pos[i].y += v.y * dt;
      pos[i].z += v.z * dt;
    }
  });
}

void require_finite(const std::vector<body_force>& f, int step) {
  for (std::size_t i = 0; i < f.size(); ++i)
    if (!std::isfinite(f[i].ax) || !std::isfinite(f[i].ay) || !std::isfinite(f[i].az) || !std::isfinite(f[i].phi))
      throw std::runtime_error(fmt::format("step {}: non-finite force on body {} (coincident bodies with softening 0?)",
                                           step, i));
}

// ---- accuracy check -----------------------------------------------------------------------------

}  // namespace

percentiles percentiles_of(std::vector<double> v) {
  percentiles p;
  p.count = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest value with at least q % of the sample at or below it.
  auto rank = [&](double q) {
    const auto r = static_cast<std::size_t>(std::ceil(q / 100.0 * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, r == 0 ? 0 : r - 1)];
  };
  p.p1 = rank(1);
  p.p50 = rank(50);
  p.p99 = rank(99);
  p.max = v.back();
  return p;
}

namespace {

std::vector<std::int32_t> check_targets(std::size_t n, std::size_t sample) {
  const std::size_t s = (sample == 0 || sample >= n) ? n : sample;
  std::vector<std::int32_t> t(s);
  for (std::size_t k = 0; k < s; ++k) t[k] = static_cast<std::int32_t>(k * n / s);  // evenly strided, deterministic
  return t;
}

percentiles acceleration_errors(const std::vector<body_force>& tree_f, const std::vector<direct_force>& exact,
                                const std::vector<std::int32_t>& targets) {
  std::vector<double> rel(targets.size());
  for (std::size_t k = 0; k < targets.size(); ++k) {
    const body_force& a = tree_f[static_cast<std::size_t>(targets[k])];
    const direct_force& d = exact[k];
    const double ex = a.ax - d.ax, ey = a.ay - d.ay, ez = a.az - d.az;
    const double norm = std::sqrt(d.ax * d.ax + d.ay * d.ay + d.az * d.az);
    const double err = std::sqrt(ex * ex + ey * ey + ez * ez);
    rel[k] = norm > 0 ? err / norm : (err > 0 ? std::numeric_limits<double>::infinity() : 0.0);
    if (!std::isfinite(a.ax) || !std::isfinite(a.ay) || !std::isfinite(a.az)) rel[k] = std::numeric_limits<double>::infinity();
  }
  return percentiles_of(std::move(rel));
}

// ---- timing and reports ---------------------------------------------------------------------------

// One step's line: the five time columns both paths share (ms); print_step adds the energy. With
// the FMM, setup is its geometry, lists, task DAG and scheduler, forces its evaluation (column
// "fmm"), and accumulate is not printed (P2M and M2M are tasks of its DAG).
struct step_line {
  double build = 0, setup = 0, accumulate = 0, forces = 0, integrate = 0;
  double total() const { return build + setup + accumulate + forces + integrate; }
};

bool uses_fmm(const sim_options& o) { return o.solver == "fmm"; }

// The solver line above the per-step lines: what computed the forces, with its parameters.
void print_solver(const sim_options& o) {
  const std::string what =
      uses_fmm(o) ? fmt::format("fmm, order {}, theta {} (cells' radii: r_A + r_B < theta |z_A - z_B|), float expansions",
                                o.order, o.theta)
                  : fmt::format("bh, theta {} (Barnes-Hut walk, {})", o.theta,
                                o.quadrupole ? "monopole + quadrupole" : "monopole only");
  std::fputs(fmt::format("solver    {}; softening {}\n", what, o.softening).c_str(), stdout);
}

void print_header(bool fmm) {
  std::fputs((fmm ? fmt::format("{:>5} {:>9} | {:>9} {:>9} {:>9} {:>9} | {:>9} | {:>15} {:>10}\n", "step", "time", "build",
                                "setup", "fmm", "integrate", "total ms", "energy", "dE/|E0|")
                  : fmt::format("{:>5} {:>9} | {:>9} {:>9} {:>10} {:>9} {:>9} | {:>9} | {:>15} {:>10}\n", "step", "time",
                                "build", "setup", "accumulate", "forces", "integrate", "total ms", "energy", "dE/|E0|"))
                 .c_str(),
             stdout);
}

void print_step(int s, double time, const step_line& st, const energy* e, double e0, bool fmm) {
  std::string energy_text = e ? fmt::format("{:>15.8e} {:>+10.2e}", e->total(), (e->total() - e0) / std::abs(e0))
                              : fmt::format("{:>15} {:>10}", "-", "-");
  const std::string phases = fmm ? fmt::format("{:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f}", st.build, st.setup, st.forces, st.integrate)
                                 : fmt::format("{:>9.3f} {:>9.3f} {:>10.3f} {:>9.3f} {:>9.3f}", st.build, st.setup,
                                               st.accumulate, st.forces, st.integrate);
  std::fputs(fmt::format("{:>5} {:>9.4f} | {} | {:>9.3f} | {}\n", s, time, phases, st.total(), energy_text).c_str(), stdout);
  std::fflush(stdout);
}

// The summary's phase table (mean ms per step and share) and the dominant phase.
std::string phase_table(const std::vector<std::pair<std::string, double>>& phases) {
  double total = 0;
  for (const auto& ph : phases) total += ph.second;
  std::string out = fmt::format("{:<12} {:>12} {:>8}\n", "phase", "mean ms", "share");
  std::string dominant;
  double dominant_ms = -1;
  for (const auto& [name, ms] : phases) {
    out += fmt::format("{:<12} {:>12.3f} {:>7.1f}%\n", name, ms, total > 0 ? 100.0 * ms / total : 0.0);
    if (ms > dominant_ms) {
      dominant = name;
      dominant_ms = ms;
    }
  }
  out += fmt::format("{:<12} {:>12.3f} {:>7.1f}%\n", "step", total, 100.0);
  out += fmt::format("dominant  {} ({:.1f}% of a step)\n", dominant, total > 0 ? 100.0 * dominant_ms / total : 0.0);
  return out;
}

// The checks both paths run: accuracy against direct summation at theta 0.5 (and the run's theta,
// reported only), then the energy drift.
class checker {
 public:
  checker(const sim_options& o, const walk_params& wp, unsigned threads) : o_(o), wp_(wp), threads_(threads) {}

  // points: the bodies in the walk's order; run_forces: the walk's forces at the run's theta;
  // forces_at(theta): the same walk at another theta.
  void accuracy(const std::vector<ct::point>& points, const std::vector<body_force>& run_forces,
                const std::function<std::vector<body_force>(float)>& forces_at, const char* when) {
    const auto targets = check_targets(points.size(), o_.check_sample);
    if (static_cast<double>(targets.size()) * static_cast<double>(points.size()) > 1e10)
      spdlog::warn("accuracy check: direct summation of {} bodies against {} will take a while (--check-sample)",
                   targets.size(), points.size());
    const auto t0 = clock_type::now();
    const auto exact = direct_forces(points, targets, o_.softening * o_.softening, threads_);
    const double direct_ms = ms_since(t0);
    // The bound is stated at theta = 0.5; a run at another theta is also reported, unbounded.
    std::vector<float> thetas = {0.5f};
    if (wp_.theta != 0.5f) thetas.push_back(wp_.theta);
    for (float th : thetas) {
      const std::vector<body_force> f = th == wp_.theta ? run_forces : forces_at(th);
      const percentiles pc = acceleration_errors(f, exact, targets);
      const bool bounded = th == 0.5f;
      const bool pass = !bounded || (pc.p50 <= o_.max_p50 && pc.p99 <= o_.max_p99);
      failed_ = failed_ || !pass;
      lines_.push_back(fmt::format(
          "accuracy  {:<6} {}theta {:.2f}{}: |a_{} - a_direct| / |a_direct| over {} bodies: p1 {:.2e}  p50 {:.2e}  "
          "p99 {:.2e}  max {:.2e}{}",
          when, uses_fmm(o_) ? fmt::format("fmm order {} ", o_.order) : std::string(), th,
          o_.quadrupole ? "" : " (monopole only)", uses_fmm(o_) ? "fmm" : "tree", pc.count, pc.p1, pc.p50, pc.p99, pc.max,
          bounded ? fmt::format("  (bounds p50 <= {:.0e}, p99 <= {:.0e}) {}", o_.max_p50, o_.max_p99, pass ? "PASS" : "FAIL")
                  : std::string("  (reported only; the bounds are for theta 0.50)")));
    }
    spdlog::info("accuracy check {}: direct summation for {} bodies against {} ({:.1f} ms)", when, targets.size(),
                 points.size(), direct_ms);
  }

  // Direct-summation energies where affordable (N up to direct_energy_limit), else none.
  bool direct_energy() const { return o_.check && o_.n <= o_.direct_energy_limit; }
  double direct_total(const std::vector<vec3>& vel, const std::vector<ct::point>& pos) const {
    return kinetic_energy(vel, pos) + direct_potential_energy(pos, o_.softening * o_.softening, threads_);
  }

  // The drift check (with --check) or the drift line (without); returns the lines for the summary.
  std::string finish(const energy& e0_tree, const energy& e_tree, double e0_direct, double e_end_direct, int steps) {
    const double drift_tree = std::abs(e_tree.total() - e0_tree.total()) / std::abs(e0_tree.total());
    std::string out;
    if (!o_.check)
      return fmt::format("energy    |E_end - E_0| / |E_0| over {} steps: {:.2e} (tree potential; --check for the bounds)\n",
                         steps, drift_tree);
    bool pass = false;
    lines_.push_back(energy_check_line(o_, steps, drift_tree, direct_energy(), e0_direct, e_end_direct, pass));
    failed_ = failed_ || !pass;
    for (const auto& l : lines_) out += "check     " + l + "\n";
    out += fmt::format("result    {}\n", failed_ ? "FAIL" : "PASS");
    return out;
  }
  bool failed() const { return failed_; }

 private:
  const sim_options& o_;
  walk_params wp_;
  unsigned threads_;
  bool failed_ = false;
  std::vector<std::string> lines_;
};

std::string summary_head(const sim_options& o, const std::string& backend, std::int64_t depth, std::int64_t nodes,
                         std::int64_t leaves) {
  std::string out = fmt::format("\nsummary   {} bodies, {} steps of dt {}, solver {}, theta {}, softening {}, {} per leaf at most, {}\n",
                                o.n, o.steps, o.dt, o.solver, o.theta, o.softening, o.max_leaf,
                                uses_fmm(o) ? fmt::format("order {}", o.order)
                                            : std::string(o.quadrupole ? "monopole + quadrupole" : "monopole only"));
  out += fmt::format("backend   {}\n", backend);
  out += fmt::format("octree    last step: depth {}, {} nodes, {} leaves\n", depth, nodes, leaves);
  return out;
}

// ---- the CPU path -------------------------------------------------------------------------------

int run_cpu(const sim_options& o, std::vector<ct::point> pos, std::vector<vec3> vel, const walk_params& wp,
            canopy::scheduler_options sopt, unsigned threads) {
  sopt.blocks = static_cast<int>(threads);
  const bool fmm = uses_fmm(o);
  std::unique_ptr<force_backend> backend = fmm ? make_cpu_fmm_backend(sopt, threads, o.order) : make_cpu_backend(sopt, threads);
  const float dt = static_cast<float>(o.dt), half_dt = 0.5f * dt;
  std::vector<body_force> forces(o.n);
  force_times ft;

  // Step 0: the initial forces (also the warm-up: first allocations). Not in the summary.
  auto t0 = clock_type::now();
  built b = build_and_reorder(pos, vel, o.max_leaf, threads);
  const double build0 = ms_since(t0);
  backend->compute(b.tree, wp, forces, ft);
  require_finite(forces, 0);
  spdlog::info("backend: {}", backend->describe());
  if (fmm)
    spdlog::info("initial octree: depth {}, {} nodes, {} leaves (max {} per leaf); build {:.1f} ms, fmm setup {:.2f} ms, "
                 "fmm {:.2f} ms",
                 b.tree.depth, b.tree.node_count(), b.tree.leaves.size(), o.max_leaf, build0, ft.setup_ms, ft.forces_ms);
  else
    spdlog::info("initial octree: depth {}, {} nodes, {} leaves (max {} per leaf); build {:.1f} ms, setup {:.2f} ms, "
                 "accumulate {:.3f} ms, forces {:.2f} ms",
                 b.tree.depth, b.tree.node_count(), b.tree.leaves.size(), o.max_leaf, build0, ft.setup_ms,
                 ft.accumulate_ms, ft.forces_ms);
  const energy e0 = kick_and_energy(vel, pos, forces, 0.0f, threads);

  checker check(o, wp, threads);
  const double e0_direct = check.direct_energy() ? check.direct_total(vel, pos) : 0.0;
  auto forces_at = [&](const ct::octree& tree) {
    return [&backend, &tree, wp](float theta) {
      std::vector<body_force> f(tree.points.size());
      walk_params p = wp;
      p.theta = theta;
      force_times unused;
      backend->compute(tree, p, f, unused);
      return f;
    };
  };
  if (o.check) check.accuracy(b.tree.points, forces, forces_at(b.tree), "start");

  print_solver(o);
  print_header(fmm);
  std::vector<step_line> lines;
  double reorder = 0;
  energy e = e0;
  for (int s = 1; s <= o.steps; ++s) {
    step_line st;
    t0 = clock_type::now();
    kick_drift(vel, pos, forces, half_dt, dt, threads);
    st.integrate = ms_since(t0);

    t0 = clock_type::now();
    b = build_and_reorder(pos, vel, o.max_leaf, threads);
    st.build = ms_since(t0);
    reorder += b.reorder_ms / o.steps;

    backend->compute(b.tree, wp, forces, ft);
    st.setup = ft.setup_ms;
    st.accumulate = ft.accumulate_ms;
    st.forces = ft.forces_ms;
    require_finite(forces, s);

    t0 = clock_type::now();
    e = kick_and_energy(vel, pos, forces, half_dt, threads);
    st.integrate += ms_since(t0);
    lines.push_back(st);
    print_step(s, s * o.dt, st, &e, e0.total(), fmm);
  }

  step_line mean;
  for (const auto& t : lines) {
    mean.build += t.build / lines.size();
    mean.setup += t.setup / lines.size();
    mean.accumulate += t.accumulate / lines.size();
    mean.forces += t.forces / lines.size();
    mean.integrate += t.integrate / lines.size();
  }
  std::string out = summary_head(o, backend->describe(), b.tree.depth, b.tree.node_count(),
                                 static_cast<std::int64_t>(b.tree.leaves.size()));
  if (fmm)
    out += phase_table({{"build", mean.build}, {"setup", mean.setup}, {"fmm", mean.forces}, {"integrate", mean.integrate}});
  else
    out += phase_table({{"build", mean.build},
                        {"setup", mean.setup},
                        {"accumulate", mean.accumulate},
                        {"forces", mean.forces},
                        {"integrate", mean.integrate}});
  out += fmt::format("(build includes {:.3f} ms reordering the bodies' state to the octree's order)\n", reorder);
  if (o.check) check.accuracy(b.tree.points, forces, forces_at(b.tree), "end");
  const double e_end_direct = check.direct_energy() ? check.direct_total(vel, pos) : 0.0;
  out += check.finish(e0, e, e0_direct, e_end_direct, o.steps);
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  return check.failed() ? exit_check_failed : exit_ok;
}

// ---- the GPU path -------------------------------------------------------------------------------

template <class T>
T median_of(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? T{} : v[v.size() / 2];
}

int run_gpu(const sim_options& o, const std::vector<ct::point>& pos0, const std::vector<vec3>& vel0,
            const walk_params& wp, const canopy::scheduler_options& sopt, unsigned threads) {
  const bool fmm = uses_fmm(o);
  const bool level_graph = fmm && (o.fmm_schedule.empty() ? std::string(default_fmm_schedule) : o.fmm_schedule) == "graph";
  std::unique_ptr<resident_sim> sim = make_resident_sim(sopt, wp, o.max_leaf, fmm ? o.order : 0, level_graph);
  const float dt = static_cast<float>(o.dt);

  // Step 0: upload, the first tree and forces (also the warm-up: module load, first allocations).
  auto t0 = clock_type::now();
  sim->start(pos0, vel0);
  const resident_times first = sim->times();
  const resident_energy ef = sim->energies();
  const energy e0{ef.kinetic, ef.potential};
  resident_tree_stats ts = sim->tree_stats();
  spdlog::info("backend: {}", sim->describe());
  spdlog::info("initial octree: depth {}, {} nodes, {} leaves (max {} per leaf); start {:.1f} ms (build {:.2f} ms, "
               "{} {:.2f} ms, accumulate {:.3f} ms, {} {:.2f} ms)",
               ts.depth, ts.nodes, ts.leaves, o.max_leaf, ms_since(t0), first.build, fmm ? "fmm setup" : "graph",
               first.graph, first.accumulate, fmm ? "fmm" : "forces", first.forces);

  checker check(o, wp, threads);
  auto forces_at = [&](float theta) { return sim->forces_at(theta); };
  // The checks read the bodies once (one download) for both the direct energy and the accuracy.
  const std::vector<ct::point> start_pos = o.check ? sim->positions() : std::vector<ct::point>{};
  const double e0_direct = check.direct_energy() ? check.direct_total(sim->velocities(), start_pos) : 0.0;
  if (o.check) {
    const std::vector<body_force> f = sim->forces();
    require_finite(f, 0);
    check.accuracy(start_pos, f, forces_at, "start");
  }

  print_solver(o);
  print_header(fmm);
  std::vector<resident_times> times;
  std::vector<double> wall;
  energy e = e0;
  for (int s = 1; s <= o.steps; ++s) {
    const bool diag = (o.diag_every > 0 && s % o.diag_every == 0) || s == o.steps;
    t0 = clock_type::now();
    sim->step(dt, diag);
    const resident_times t = sim->times();  // waits for the step
    wall.push_back(ms_since(t0));
    times.push_back(t);
    if (diag) {
      const resident_energy r = sim->energies();
      e = energy{r.kinetic, r.potential};
      if (!std::isfinite(e.total()))
        throw std::runtime_error(fmt::format("step {}: non-finite energy (coincident bodies with softening 0?)", s));
    }
    const step_line st{t.build + t.reorder, t.graph, t.accumulate, t.forces, t.drift + t.kick};
    print_step(s, s * o.dt, st, diag ? &e : nullptr, e0.total(), fmm);
  }

  resident_times mean;
  for (const auto& t : times) {
    const double k = 1.0 / static_cast<double>(times.size());
    mean.drift += t.drift * k;
    mean.build += t.build * k;
    mean.reorder += t.reorder * k;
    mean.graph += t.graph * k;
    mean.accumulate += t.accumulate * k;
    mean.forces += t.forces * k;
    mean.kick += t.kick * k;
  }
  ts = sim->tree_stats();
  std::string out = summary_head(o, sim->describe(), ts.depth, ts.nodes, ts.leaves);
  if (fmm)
    out += phase_table({{"drift", mean.drift},
                        {"build", mean.build},
                        {"reorder", mean.reorder},
                        {"setup", mean.graph},
                        {"fmm", mean.forces},
                        {"kick", mean.kick}});
  else
    out += phase_table({{"drift", mean.drift},
                        {"build", mean.build},
                        {"reorder", mean.reorder},
                        {"graph", mean.graph},
                        {"accumulate", mean.accumulate},
                        {"forces", mean.forces},
                        {"kick", mean.kick}});
  const double wall_median = median_of(wall);
  out += fmt::format(
      "(stream time: CUDA events between the phases; drift + kick are the CPU path's integrate, build + reorder its "
      "build, {} its setup)\n",
      fmm ? "setup (the FMM's geometry, lists, task DAG and scheduler, built on the device)" : "graph");
  out += fmt::format("wall      per step, host clock from enqueue until the step's times are known: median {:.3f} ms "
                     "(min {:.3f}, max {:.3f}); {:.1f}M bodies per second\n",
                     wall_median, *std::min_element(wall.begin(), wall.end()), *std::max_element(wall.begin(), wall.end()),
                     wall_median > 0 ? static_cast<double>(o.n) / wall_median / 1e3 : 0.0);
  const std::vector<ct::point> end_pos = o.check ? sim->positions() : std::vector<ct::point>{};
  if (o.check) {
    const std::vector<body_force> f = sim->forces();
    require_finite(f, o.steps);
    check.accuracy(end_pos, f, forces_at, "end");
  }
  const double e_end_direct = check.direct_energy() ? check.direct_total(sim->velocities(), end_pos) : 0.0;
  out += check.finish(e0, e, e0_direct, e_end_direct, o.steps);
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  return check.failed() ? exit_check_failed : exit_ok;
}

}  // namespace

void initial_conditions(const sim_options& o, std::vector<ct::point>& pos, std::vector<vec3>& vel) {
  switch (o.dist) {
    case ct::distribution::plummer:
      pos = ct::generate_plummer(o.n, o.seed);
      vel = plummer_velocities(pos, o.seed);
      break;
    case ct::distribution::uniform:
      pos = ct::generate_uniform(o.n, o.seed);
      vel.assign(o.n, vec3{0, 0, 0});
      break;
    default:
      pos = ct::generate_clusters(o.n, o.seed);
      vel.assign(o.n, vec3{0, 0, 0});
      break;
  }
}

// Velocities from an engine per chunk of 65,536 bodies (as the positions are drawn), so that a rank
// draws only its own; the mean momentum is not removed (it is a sum over every rank).
constexpr std::size_t velocity_chunk = 65536;

void initial_slice(const sim_options& o, std::size_t begin, std::size_t end, unsigned threads, std::vector<ct::point>& pos,
                   std::vector<vec3>& vel, double momentum[4]) {
  for (int k = 0; k < 4; ++k) momentum[k] = 0;
  // From the start of the first chunk: a velocity draw depends on the body's position.
  const std::size_t from = std::min(begin, end) / velocity_chunk * velocity_chunk;
  const std::vector<ct::point> all = ct::generate_slice(o.dist, o.n, o.seed, from, std::max(begin, end));
  pos.assign(all.begin() + static_cast<std::ptrdiff_t>(std::min(begin, end) - from), all.end());
  vel.assign(pos.size(), vec3{0, 0, 0});
  if (o.dist != ct::distribution::plummer || begin >= end) return;
  const std::size_t chunks = (end - from + velocity_chunk - 1) / velocity_chunk;
  std::vector<std::array<double, 4>> sums(chunks, {0, 0, 0, 0});
  parallel_for(chunks, threads, 1, [&](std::size_t kb, std::size_t ke) {
    for (std::size_t k = kb; k < ke; ++k) {
      const std::size_t c = from / velocity_chunk + k;
      std::mt19937_64 rng(o.seed ^ 0x9e3779b97f4a7c15ull ^ (0xbf58476d1ce4e5b9ull * (c + 1)));
      const std::size_t e = std::min(end, (c + 1) * velocity_chunk);
      for (std::size_t i = c * velocity_chunk; i < e; ++i) {
        const ct::point& p = all[i - from];
        const vec3 v = plummer_velocity(p, rng);  // drawn for the chunk's bodies before `begin` too
        if (i < begin) continue;
        vel[i - begin] = v;
        sums[k][0] += p.m * double(v.x);
        sums[k][1] += p.m * double(v.y);
        sums[k][2] += p.m * double(v.z);
        sums[k][3] += p.m;
      }
    }
  });
  for (const auto& s : sums)
    for (int k = 0; k < 4; ++k) momentum[k] += s[k];
}

void validate(const sim_options& o) {
  if (o.n < 2) throw std::invalid_argument(fmt::format("--n must be at least 2, not {}", o.n));
  if (o.n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw std::invalid_argument(fmt::format("--n must be at most 2^31 - 1, not {}", o.n));
  if (o.steps < 1) throw std::invalid_argument(fmt::format("--steps must be at least 1, not {}", o.steps));
  if (o.diag_every < 0) throw std::invalid_argument(fmt::format("--diag-every must be at least 0, not {}", o.diag_every));
  if (!(std::isfinite(o.dt) && o.dt > 0)) throw std::invalid_argument(fmt::format("--dt must be a positive number, not {}", o.dt));
  if (o.solver != "bh" && o.solver != "fmm")
    throw std::invalid_argument(fmt::format("--solver must be bh or fmm, not '{}'", o.solver));
  if (o.solver == "fmm") {
    if (o.order < min_fmm_order || o.order > max_fmm_order)
      throw std::invalid_argument(
          fmt::format("--order must be in {}..{} (the FMM's expansion order), not {}", min_fmm_order, max_fmm_order, o.order));
    // The FMM's criterion compares both cells' radii with their distance (docs/FMM.md); above 1 it
    // could accept a pair of overlapping cells.
    if (!(std::isfinite(o.theta) && o.theta > 0 && o.theta <= 1))
      throw std::invalid_argument(fmt::format("--theta must be in (0, 1] with --solver fmm, not {}", o.theta));
    if (!o.quadrupole) throw std::invalid_argument("--monopole applies to --solver bh only (the FMM's order is --order)");
  }
  if (!(std::isfinite(o.theta) && o.theta > 0 && o.theta <= max_theta))
    throw std::invalid_argument(fmt::format(
        "--theta must be in (0, 2/sqrt(3) = 1.1547] (above it a node could be taken whole by a body inside it), not {}",
        o.theta));
  if (!(std::isfinite(o.softening) && o.softening >= 0))
    throw std::invalid_argument(fmt::format("--softening must be a number >= 0, not {}", o.softening));
  if (o.max_leaf < 1) throw std::invalid_argument(fmt::format("--max-leaf must be at least 1, not {}", o.max_leaf));
  if (o.backend != "cpu" && o.backend != "gpu" && o.backend != "auto")
    throw std::invalid_argument(fmt::format("--backend must be cpu, gpu or auto, not '{}'", o.backend));
  if (o.dist == ct::distribution::lattice) throw std::invalid_argument("--dist must be plummer, uniform or clusters");
  if (o.balance != "count" && o.balance != "work")
    throw std::invalid_argument(fmt::format("--balance must be count or work, not '{}'", o.balance));
  if (o.start_rank < -1) throw std::invalid_argument(fmt::format("--start-rank must be a rank or -1, not {}", o.start_rank));
  if (!(o.max_single_p99 >= 0))
    throw std::invalid_argument(fmt::format("--max-single-p99 must be a number >= 0, not {}", o.max_single_p99));
}

std::string energy_check_line(const sim_options& o, int steps, double drift_tree, bool direct, double e0_direct,
                              double e_end_direct, bool& pass) {
  double drift = drift_tree;
  std::string how = "tree potential";
  if (direct) {
    drift = std::abs(e_end_direct - e0_direct) / std::abs(e0_direct);
    how = fmt::format("direct-summation potential, E0 {:.8e}, E_end {:.8e}; with the tree potential {:.2e}", e0_direct,
                      e_end_direct, drift_tree);
  }
  pass = drift <= o.max_drift;
  return fmt::format("energy    |E_end - E_0| / |E_0| over {} steps: {:.2e} ({}) (bound {:.0e}) {}", steps, drift, how,
                     o.max_drift, pass ? "PASS" : "FAIL");
}

int run_simulation(const sim_options& o) {
  validate(o);
  if (o.threads != 0) ct::set_host_threads(o.threads);
  const unsigned threads = o.threads != 0 ? o.threads : ct::host_threads();
  canopy::scheduler_options sopt;
  sopt.mode = o.mode;
  const bool use_gpu = o.backend == "gpu" || (o.backend == "auto" && gpu_backend_usable());
  if (!use_gpu && uses_fmm(o) && !o.fmm_schedule.empty() && o.fmm_schedule != "dag")
    throw std::invalid_argument("--fmm-schedule " + o.fmm_schedule +
                                ": the CPU backend runs the FMM as a task DAG on the CPU scheduler, dag only (the graph needs "
                                "--backend gpu)");
  if (use_gpu && uses_fmm(o) && !gpu_fmm_order_supported(o.order))
    throw std::invalid_argument(fmt::format(
        "--order {}: the GPU FMM is compiled for orders {} (canopy::fmm::gpu_orders); use one of them or --backend cpu",
        o.order, gpu_fmm_orders()));

  // Bodies.
  const auto t0 = clock_type::now();
  std::vector<ct::point> pos;
  std::vector<vec3> vel;
  initial_conditions(o, pos, vel);
  spdlog::info("{} bodies, {} ({}), seed {} ({:.1f} ms)", o.n, ct::to_string(o.dist),
               o.dist == ct::distribution::plummer ? "equilibrium velocities" : "at rest", o.seed, ms_since(t0));

  walk_params wp;
  wp.theta = static_cast<float>(o.theta);
  wp.eps2 = static_cast<float>(o.softening * o.softening);
  wp.quadrupole = o.quadrupole;
  if (use_gpu) return run_gpu(o, pos, vel, wp, sopt, threads);
  return run_cpu(o, std::move(pos), std::move(vel), wp, sopt, threads);
}

}  // namespace nbody
