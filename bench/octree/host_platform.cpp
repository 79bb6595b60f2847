// SPDX-License-Identifier: Apache-2.0
// The host side of the benchmark: the serial double-precision reference ("host") and the scheduler
// on std::thread workers ("cpu"), timed with std::chrono::steady_clock.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>

#include <canopy/passes/upward_runner.hpp>

#include "octree_bench.hpp"

namespace canopy::bench {

namespace {

using clock_type = std::chrono::steady_clock;

double us_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - start).count();
}

template <class T>
trees::comparison compare(const trees::octree& tree, std::vector<trees::multipole<T>> computed,
                          std::span<const trees::multipole<double>> reference, bool perturb) {
  if (perturb && !computed.empty()) computed.front().mass *= T(1.01);
  return trees::compare_payloads<T>(tree, computed, reference);
}

// Host memcpy of 64 MiB on one thread, read + written bytes, median of 5 after one warm-up: the
// ceiling the cpu backend's GB/s are compared with (one thread streams about as fast as a few).
double measure_host_copy_bandwidth() {
  constexpr std::size_t bytes = std::size_t{64} << 20;
  std::vector<unsigned char> src(bytes, 1), dst(bytes, 0);
  std::vector<double> us;
  for (int i = 0; i < 6; ++i) {
    const auto start = clock_type::now();
    std::memcpy(dst.data(), src.data(), bytes);
    const double t = us_since(start);
    src[static_cast<std::size_t>(i)] = dst[bytes - 1 - static_cast<std::size_t>(i)];  // keep the copy observable
    if (i > 0) us.push_back(t);
  }
  const double median_us = summarize(us).median;
  return median_us > 0 ? 2.0 * static_cast<double>(bytes) / median_us / 1e3 : 0;
}

class reference_runner final : public pass_runner {
 public:
  explicit reference_runner(const trees::octree& tree) : tree_(tree) {}
  run_outcome run_once() override {
    result_.clear();
    const auto start = clock_type::now();
    result_ = trees::reference_upward_pass(tree_);
    return run_outcome{canopy::status::ok, {}, us_since(start)};
  }
  trees::comparison check(const trees::octree& tree, std::span<const trees::multipole<double>> reference,
                          bool perturb) override {
    return compare<double>(tree, result_, reference, perturb);
  }
  timed_runs time(int warmup, int reps) override {
    for (int i = 0; i < warmup; ++i) result_ = trees::reference_upward_pass(tree_);
    std::vector<double> samples;
    for (int i = 0; i < reps; ++i) {
      const auto start = clock_type::now();
      result_ = trees::reference_upward_pass(tree_);
      samples.push_back(us_since(start));
    }
    const summary s = summarize(samples);
    return timed_runs{s, s};  // on the host the call is the whole run: one clock
  }

 private:
  const trees::octree& tree_;
  std::vector<trees::multipole<double>> result_;
};

class cpu_runner final : public pass_runner {
 public:
  /// `pass`: the tree's pass for the variant's task kind, shared by the variants of that kind.
  cpu_runner(trees::upward_runner& pass, canopy::mode m) : pass_(pass), mode_(m) {}

  run_outcome run_once() override {
    pass_.set_mode(mode_);
    pass_.poison();
    const trees::timed_run t = pass_.run_timed();
    return run_outcome{t.result.code, t.result.message, t.elapsed_us};
  }
  trees::comparison check(const trees::octree& tree, std::span<const trees::multipole<double>> reference,
                          bool perturb) override {
    return compare<float>(tree, pass_.download(), reference, perturb);
  }
  timed_runs time(int warmup, int reps) override {
    pass_.set_mode(mode_);
    for (int i = 0; i < warmup; ++i) throw_if_failed(pass_.run());
    std::vector<double> samples;
    for (int i = 0; i < reps; ++i) {
      const trees::timed_run t = pass_.run_timed();
      samples.push_back(t.elapsed_us);
      throw_if_failed(t.result);
    }
    const summary s = summarize(samples);
    return timed_runs{s, s};  // on the host the call is the whole run: one clock
  }

 private:
  static void throw_if_failed(const canopy::run_result& r) {
    if (!r.ok()) throw std::runtime_error(std::string(canopy::to_string(r.code)) + " in a timed run: " + r.message);
  }
  trees::upward_runner& pass_;
  canopy::mode mode_;
};

class host_platform final : public platform {
 public:
  std::vector<std::string> backends() const override { return {std::string(backend_cpu), std::string(backend_host)}; }

  std::vector<platform_facts> facts(const bench_options& options) override {
    if (copy_gb_per_s_ == 0) copy_gb_per_s_ = measure_host_copy_bandwidth();
    const int workers = options.cpu_workers > 0 ? options.cpu_workers : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    platform_facts cpu{std::string(backend_cpu), std::to_string(workers) + " CPU workers", 0, {}, copy_gb_per_s_,
                       "memcpy of 64 MiB on one host thread, read + written bytes"};
    platform_facts host{std::string(backend_host), "1 host thread (double precision)", 0, {}, copy_gb_per_s_,
                        cpu.copy_method};
    return {cpu, host};
  }

  void load(const trees::octree& tree, const bench_options& options) override {
    tree_ = &tree;
    passes_.clear();  // made on first use, one per task kind
    options_ = options.scheduler;
    options_.blocks = options.cpu_workers;
    bucket_points_ = options.bucket_points;
    options_.deadline = std::chrono::milliseconds(static_cast<long long>(std::max(1.0, std::ceil(options.budget_ms))));
  }
  void unload() override {
    tree_ = nullptr;
    passes_.clear();
  }

  std::unique_ptr<pass_runner> runner(const variant& v) override {
    if (tree_ == nullptr) throw std::logic_error("host platform: no tree loaded");
    if (v.backend == backend_host && v.name == "reference") return std::make_unique<reference_runner>(*tree_);
    if (v.backend == backend_cpu && v.mode) {
      auto pass = passes_.find(v.tasks);
      if (pass == passes_.end()) {
        trees::upward_options o{trees::pass_backend::cpu, v.tasks, options_};
        o.scheduler.mode = *v.mode;
        o.bucket_points = bucket_points_;
        pass = passes_.emplace(v.tasks, std::make_unique<trees::upward_runner>(*tree_, o)).first;
      }
      return std::make_unique<cpu_runner>(*pass->second, *v.mode);
    }
    throw std::invalid_argument("host platform: cannot run '" + v.name + "' on backend " + v.backend);
  }

 private:
  const trees::octree* tree_ = nullptr;
  std::map<trees::pass_tasks, std::unique_ptr<trees::upward_runner>> passes_;
  canopy::scheduler_options options_;
  int bucket_points_ = 0;
  double copy_gb_per_s_ = 0;
};

}  // namespace

std::unique_ptr<platform> make_host_platform() { return std::make_unique<host_platform>(); }

}  // namespace canopy::bench
