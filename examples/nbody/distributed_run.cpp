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
#include <functional>
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
#include "distributed_device_step.hpp"
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
  // `walk_at(theta)`: the forces of the same bodies and tree at another opening angle (collective).
  void accuracy(const std::vector<dist_body>& bodies, const std::vector<body_force>& run_forces, const walk_params& wp,
                const std::function<std::vector<body_force>(float)>& walk_at, const char* when) {
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
      if (th != wp.theta) at = gather_sample(walk_at(th));  // collective: every rank takes this branch
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

// Why this run cannot take the whole step on the GPUs ("" when it can): no NCCL or no device, two
// ranks of one host on one GPU (their PCI bus ids compared over the host's ranks), or --balance
// work. Every rank of a host gets the same answer; the options phase agrees on it.
std::string why_not_device_step(const sim_options& o, int local_rank) {
  std::array<char, 32> mine{};
  const std::string id = device_step_gpu(local_rank);
  std::copy_n(id.begin(), std::min(id.size(), mine.size() - 1), mine.begin());
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 1;
  MPI_Comm_size(node, &local);
  std::vector<std::array<char, 32>> ids(static_cast<std::size_t>(local));
  MPI_Allgather(mine.data(), 32, MPI_CHAR, ids.data(), 32, MPI_CHAR, node);
  MPI_Comm_free(&node);
  std::string why;
  for (std::size_t i = 0; i < ids.size() && why.empty(); ++i) {
    if (ids[i][0] == '\0') {
      why = "this nbody has no NCCL, or a rank of this host has no usable GPU";
      break;
    }
    for (std::size_t j = 0; j < i && why.empty(); ++j)
      if (ids[i] == ids[j])
        why = fmt::format("ranks {} and {} of this host would share the GPU {} (one GPU a rank)", j, i, ids[i].data());
  }
  if (why.empty() && o.balance == "work")
    why = "--balance work needs the walk's interaction counts, which the GPU walk does not record";
  return why;
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

// What the leapfrog loop drives on this rank: the host path (distributed_step, bodies in host
// memory, the walk on host threads or on the GPU) or the device path (device_step: everything on
// the GPU, NCCL between them).
class rank_engine {
 public:
  virtual ~rank_engine() = default;
  // Decomposition through walk for the bodies as they are now (collective).
  virtual void step_forces(dist_phase_times& pt) = 0;
  virtual void kick_drift(float half_dt, float dt) = 0;
  // Kick, and the energy sums of all ranks.
  virtual energy kick(float half_dt) = 0;
  // Throws when the last forces are not finite.
  virtual void require_finite_forces(int step, const energy& e) = 0;
  // Copies for the checks.
  virtual std::vector<dist_body> bodies() = 0;
  virtual std::vector<body_force> forces() = 0;
  // The same bodies and tree walked at another opening angle (collective); the run's forces stay.
  virtual std::vector<body_force> forces_at(float theta) = 0;
  virtual std::size_t held() const = 0;
  virtual let_stats let() const = 0;
  virtual std::int32_t top_nodes() const = 0;
  virtual std::size_t top_leaves() const = 0;
  virtual bool gpu_walk() const = 0;
  virtual std::string backend(int ranks) const = 0;  // the summary's line
  virtual std::string describe() const = 0;  // where rank 0 runs
  // A test aid: this rank's walks throw (every rank must stop with one line).
  virtual void fail_walk(bool fail) = 0;
  // The last step's phases in finer parts, where the engine has them (the debug log).
  virtual std::string last_parts() const { return {}; }
};

class host_engine final : public rank_engine {
 public:
  host_engine(const cd::mpi_context& ctx, cd::exchange& ex, std::vector<dist_body> bodies, const walk_params& wp, int max_leaf,
              balance_by balance, const canopy::scheduler_options& sopt, unsigned threads, std::unique_ptr<gpu_walker> walker)
      : ex_(ex), wp_(wp), threads_(threads), bodies_(std::move(bodies)), walker_(std::move(walker)),
        step_(ctx, ex, max_leaf, balance, sopt, threads) {
    step_.set_gpu_walker(walker_.get());
  }
  void fail_walk(bool fail) override { step_.fail_walk(fail); }
  void step_forces(dist_phase_times& pt) override {
    step_.rebuild(bodies_, pt);
    step_.forces(bodies_, wp_, forces_, pt, true);
  }
  void kick_drift(float half_dt, float dt) override { nbody::kick_drift(bodies_, forces_, half_dt, dt, threads_); }
  energy kick(float half_dt) override { return kick_and_energy(bodies_, forces_, half_dt, threads_, ex_); }
  void require_finite_forces(int step, const energy&) override { require_finite(forces_, step); }
  std::vector<dist_body> bodies() override { return bodies_; }
  std::vector<body_force> forces() override { return forces_; }
  std::vector<body_force> forces_at(float theta) override {
    walk_params p = wp_;
    p.theta = theta;
    std::vector<body_force> f;
    dist_phase_times unused;
    step_.forces(bodies_, p, f, unused, false);
    return f;
  }
  std::size_t held() const override { return bodies_.size(); }
  let_stats let() const override { return step_.last_let(); }
  std::int32_t top_nodes() const override { return step_.tree().top.node_count(); }
  std::size_t top_leaves() const override { return step_.tree().top.leaves.size(); }
  bool gpu_walk() const override { return walker_ != nullptr; }
  std::string backend(int ranks) const override {
    return (walker_ ? "gpu walk (" + walker_->describe() + " on rank 0), the rest on host threads" : std::string("cpu")) +
           fmt::format(", {} ranks (mpi exchange), {} threads per rank", ranks, threads_);
  }
  std::string describe() const override { return walker_ ? walker_->describe() : std::string("host threads"); }

 private:
  cd::exchange& ex_;
  walk_params wp_;
  unsigned threads_;
  std::vector<dist_body> bodies_;
  std::vector<body_force> forces_;
  std::unique_ptr<gpu_walker> walker_;
  distributed_step step_;
};

class device_engine final : public rank_engine {
 public:
  device_engine(cd::exchange& ex, std::unique_ptr<device_step> step, const std::vector<dist_body>& bodies, const walk_params& wp)
      : ex_(ex), wp_(wp), step_(std::move(step)) {
    step_->start(bodies);
  }
  void step_forces(dist_phase_times& pt) override { step_->rebuild_and_forces(wp_, pt); }
  void kick_drift(float half_dt, float dt) override { step_->kick_drift(half_dt, dt); }
  energy kick(float half_dt) override {
    double sums[2] = {0, 0};
    step_->kick(half_dt, sums[0], sums[1]);
    ex_.all_reduce(sums, 2, cd::element_type::f64, cd::reduce_op::sum);
    return energy{sums[0], sums[1]};
  }
  // The forces stay on the device: their energy sum stands for them (a non-finite force makes it so).
  void require_finite_forces(int step, const energy& e) override {
    if (!std::isfinite(e.kinetic) || !std::isfinite(e.potential))
      throw std::runtime_error(fmt::format("step {}: non-finite energy (a non-finite force: coincident bodies with softening 0?)", step));
  }
  std::vector<dist_body> bodies() override { return step_->bodies(); }
  std::vector<body_force> forces() override { return step_->forces(); }
  std::vector<body_force> forces_at(float theta) override {
    walk_params p = wp_;
    p.theta = theta;
    dist_phase_times unused;
    step_->forces_only(p, unused);
    std::vector<body_force> f = step_->forces();
    step_->forces_only(wp_, unused);  // the run's forces back for the next kick
    return f;
  }
  std::size_t held() const override { return step_->body_count(); }
  let_stats let() const override { return step_->last_let(); }
  std::int32_t top_nodes() const override { return step_->top_nodes(); }
  std::size_t top_leaves() const override { return static_cast<std::size_t>(step_->top_leaves()); }
  bool gpu_walk() const override { return true; }
  std::string backend(int ranks) const override {
    return "gpu (" + step_->describe() + " on rank 0: decomposition, build, upward pass, essential trees, walk and integration)" +
           fmt::format(", {} ranks (nccl exchange), {:.2f} GB of device memory in use on rank 0", ranks,
                       1e-9 * static_cast<double>(step_->device_bytes()));
  }
  std::string describe() const override { return step_->describe(); }
  std::string last_parts() const override { return step_->last_parts(); }
  void fail_walk(bool fail) override { step_->fail_walk(fail); }

 private:
  cd::exchange& ex_;
  walk_params wp_;
  std::unique_ptr<device_step> step_;
};

int run(const sim_options& o, const cd::mpi_context& ctx, cd::exchange& ex) {
  const bool root = ctx.rank() == 0;
  const auto [local_rank, local_ranks] = host_local_rank();
  const unsigned threads = threads_per_rank(o.threads, local_ranks);
  const bool use_gpu = o.backend == "gpu" || (o.backend == "auto" && gpu_backend_usable());
  // The whole step on the GPUs needs NCCL, one GPU a rank (NCCL refuses two ranks on one) and the
  // count balance (the GPU walk counts no interactions); --gpu-step auto takes it where it can.
  const std::string why_not_whole = use_gpu ? why_not_device_step(o, local_rank) : std::string();
  const bool device_whole = use_gpu && (o.gpu_step == "whole" || (o.gpu_step == "auto" && why_not_whole.empty()));
  ct::set_host_threads(threads);
  canopy::scheduler_options sopt;
  sopt.mode = o.mode;
  sopt.blocks = static_cast<int>(threads);
  ctx.phase("options", [&] {
    if (o.start_rank >= ctx.size())
      throw std::invalid_argument(fmt::format("--start-rank {} is not a rank of this run ({} ranks)", o.start_rank, ctx.size()));
    if (device_whole && !why_not_whole.empty()) throw std::invalid_argument("--gpu-step whole: " + why_not_whole);
  });

  // The same initial conditions as one process; this rank keeps its slice (or all, or none, with
  // --start-rank): the decomposition moves them to their owners.
  auto t0 = clock_type::now();
  std::vector<dist_body> bodies;
  {
    const auto ranks = static_cast<std::size_t>(ctx.size()), rank = static_cast<std::size_t>(ctx.rank());
    std::size_t b = rank * o.n / ranks, e = (rank + 1) * o.n / ranks;
    if (o.start_rank >= 0) {
      b = o.start_rank == ctx.rank() ? 0 : o.n;
      e = o.start_rank == ctx.rank() ? o.n : o.n;
    }
    std::vector<ct::point> pos;
    std::vector<vec3> vel;
    double momentum[4];
    initial_slice(o, b, e, threads, pos, vel, momentum);
    ex.all_reduce(momentum, 4, cd::element_type::f64, cd::reduce_op::sum);
    const double mt = momentum[3];
    bodies.reserve(e - b);
    for (std::size_t i = b; i < e; ++i) {
      vec3 v = vel[i - b];
      if (mt > 0) v = vec3{float(v.x - momentum[0] / mt), float(v.y - momentum[1] / mt), float(v.z - momentum[2] / mt)};
      bodies.push_back(dist_body{pos[i - b], v, 0.0f, i});
    }
  }
  spdlog::info("{} bodies, {} ({}), seed {}, on {} ranks, {} threads each ({:.1f} ms)", o.n, ct::to_string(o.dist),
               o.dist == ct::distribution::plummer ? "equilibrium velocities" : "at rest", o.seed, ctx.size(), threads,
               ms_since(t0));

  walk_params wp;
  wp.theta = static_cast<float>(o.theta);
  wp.eps2 = static_cast<float>(o.softening * o.softening);
  wp.quadrupole = o.quadrupole;
  const balance_by balance = o.balance == "work" ? balance_by::work : balance_by::count;
  // The GPU: the whole step on it (one device a rank of a host: local rank modulo the devices), or
  // only the walk (--gpu-step walk).
  std::unique_ptr<rank_engine> engine;
  ctx.phase("device", [&] {
    if (device_whole) {
      canopy::scheduler_options gpu_options;
      gpu_options.mode = o.mode;
      engine = std::make_unique<device_engine>(ex, make_device_step(ctx, local_rank, o.max_leaf, gpu_options), bodies, wp);
    } else {
      engine = std::make_unique<host_engine>(ctx, ex, std::move(bodies), wp, o.max_leaf, balance, sopt, threads,
                                             use_gpu ? make_gpu_walker(local_rank) : nullptr);
    }
  });
  bodies = {};
  if (use_gpu) spdlog::info("rank 0 {} on {}", device_whole ? "steps" : "walks", engine->describe());
  const float dt = static_cast<float>(o.dt), half_dt = 0.5f * dt;
  const auto walk_at = [&](float theta) { return engine->forces_at(theta); };

  // Step 0: the initial forces (also the warm-up). Not in the summary.
  dist_phase_times pt;
  t0 = clock_type::now();
  engine->step_forces(pt);
  spdlog::info("initial step: global tree {} nodes, {} leaves; {:.1f} ms on rank 0", engine->top_nodes(), engine->top_leaves(),
               ms_since(t0));
  const energy e0 = engine->kick(0.0f);
  ctx.phase("forces", [&] { engine->require_finite_forces(0, e0); });

  dist_checker check(o, ctx, ex, threads);
  const bool check_copies = check.direct_energy() || o.check || o.check_single;
  std::vector<dist_body> copies = check_copies ? engine->bodies() : std::vector<dist_body>{};
  std::vector<body_force> copied_forces = check_copies ? engine->forces() : std::vector<body_force>{};
  const double e0_direct = check.direct_energy() ? check.direct_total(copies) : 0.0;
  if (o.check) check.accuracy(copies, copied_forces, wp, walk_at, "start");
  if (o.check_single) check.against_single(copies, copied_forces, wp, sopt, !engine->gpu_walk(), "start");

  if (root) print_header();
  std::vector<std::array<double, phase_count>> mine_per_step;
  std::vector<spread> spreads;
  energy e = e0;
  engine->fail_walk(ctx.rank() == o.fail_rank);
  for (int s = 1; s <= o.steps; ++s) {
    t0 = clock_type::now();
    engine->kick_drift(half_dt, dt);
    double integrate = ms_since(t0);
    engine->step_forces(pt);
    t0 = clock_type::now();
    e = engine->kick(half_dt);
    integrate += ms_since(t0);
    ctx.phase("forces", [&] { engine->require_finite_forces(s, e); });
    const auto mine = as_array(pt, integrate);
    mine_per_step.push_back(mine);
    if (const std::string parts = engine->last_parts(); !parts.empty()) spdlog::debug("step {} on rank 0: {}", s, parts);
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
  const std::vector<std::uint64_t> held = ctx.all_gather(engine->held());
  const let_stats ls = engine->let();
  const std::vector<std::uint64_t> let_nodes = ctx.all_gather(ls.nodes_received);
  const std::vector<std::uint64_t> let_bodies = ctx.all_gather(ls.bodies_received);
  std::string out;
  if (root) {
    out += fmt::format("\nsummary   {} bodies, {} steps of dt {}, theta {}, softening {}, {} per leaf at most, {}\n", o.n,
                       o.steps, o.dt, o.theta, o.softening, o.max_leaf,
                       o.quadrupole ? "monopole + quadrupole" : "monopole only");
    out += fmt::format("backend   {}, mode {}, balance by {}\n", engine->backend(ctx.size()),
                       canopy::to_string(o.mode), o.balance);
    out += fmt::format("ranks     last step: bodies per rank min {} max {}; global tree {} nodes, {} leaves\n",
                       *std::min_element(held.begin(), held.end()), *std::max_element(held.begin(), held.end()),
                       engine->top_nodes(), engine->top_leaves());
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
  if (check_copies) {
    copies = engine->bodies();
    copied_forces = engine->forces();
  }
  if (o.check) check.accuracy(copies, copied_forces, wp, walk_at, "end");
  if (o.check_single) check.against_single(copies, copied_forces, wp, sopt, !engine->gpu_walk(), "end");
  const double e_end_direct = check.direct_energy() ? check.direct_total(copies) : 0.0;
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
std::unique_ptr<device_step> make_device_step(const cd::mpi_context&, int, int, const canopy::scheduler_options&) {
  throw std::runtime_error("--backend gpu: this nbody was built without CUDA (CANOPY_GPU=OFF)");
}
std::string device_step_gpu(int) { return {}; }
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
