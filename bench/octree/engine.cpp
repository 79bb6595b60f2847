// SPDX-License-Identifier: Apache-2.0
// The benchmark loop: for each tree, build it (only if some variant still runs), compute the
// reference, and for each variant validate one run before timing it; keep to the time budget.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <stdexcept>
#include <string>

#include "common/text.hpp"
#include "octree_bench.hpp"

namespace canopy::bench {

namespace {

// "812.3 us" below 10 ms, "45.1 ms" above: what a person reads in a progress line.
std::string human_us(double us) { return us < 1e4 ? printf_string("%.1f us", us) : printf_string("%.1f ms", us / 1e3); }

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::string_view to_string(entry_status s) noexcept {
  switch (s) {
    case entry_status::ok: return "ok";
    case entry_status::fail: return "fail";
    case entry_status::skipped: return "skipped";
  }
  return "unknown";
}

bool bench_report::any_wrong_result() const {
  return std::any_of(entries.begin(), entries.end(), [](const bench_entry& e) { return e.wrong_result; });
}

bool bench_report::any_run_failed() const {
  return std::any_of(entries.begin(), entries.end(),
                     [](const bench_entry& e) { return e.status == entry_status::fail && !e.wrong_result; });
}

const platform_facts* bench_report::facts(std::string_view name) const {
  for (const platform_facts& f : platforms)
    if (f.backend == name) return &f;
  return nullptr;
}

void finish_report(bench_report& report) {
  // Group entries by tree (they are stored tree by tree, so a label change starts a new group).
  std::size_t begin = 0;
  while (begin < report.entries.size()) {
    std::size_t end = begin;
    while (end < report.entries.size() && report.entries[end].tree == report.entries[begin].tree) ++end;
    double mutex_us = 0, best_us = 0, best_e2e_us = 0;
    std::string best_name, best_e2e_name;
    for (std::size_t i = begin; i < end; ++i) {
      const bench_entry& e = report.entries[i];
      if (e.status != entry_status::ok || e.median_us <= 0) continue;
      if (e.variant == canopy::to_string(canopy::mode::mutex) && e.backend == report.backend) mutex_us = e.median_us;
      if (e.baseline && (best_us == 0 || e.median_us < best_us)) {
        best_us = e.median_us;
        best_name = e.variant;
      }
      if (e.baseline && e.e2e_median_us > 0 && (best_e2e_us == 0 || e.e2e_median_us < best_e2e_us)) {
        best_e2e_us = e.e2e_median_us;
        best_e2e_name = e.variant;
      }
    }
    for (std::size_t i = begin; i < end; ++i) {
      bench_entry& e = report.entries[i];
      e.gb_per_s = e.percent_of_copy = e.speedup_vs_mutex = e.speedup_vs_best_baseline = e.e2e_speedup_vs_best_baseline = 0;
      e.best_baseline = best_name;
      e.best_e2e_baseline = best_e2e_name;
      if (e.status != entry_status::ok || e.median_us <= 0) continue;
      e.gb_per_s = e.bytes / e.median_us / 1e3;  // bytes per microsecond = 1e6 B/s; / 1e3 -> 1e9 B/s
      if (const platform_facts* f = report.facts(e.backend); f != nullptr && f->copy_gb_per_s > 0)
        e.percent_of_copy = 100.0 * e.gb_per_s / f->copy_gb_per_s;
      if (mutex_us > 0) e.speedup_vs_mutex = mutex_us / e.median_us;
      if (best_us > 0) e.speedup_vs_best_baseline = best_us / e.median_us;
      if (best_e2e_us > 0 && e.e2e_median_us > 0) e.e2e_speedup_vs_best_baseline = best_e2e_us / e.e2e_median_us;
    }
    begin = end;
  }
}

bench_engine::bench_engine(bench_options options, progress_fn progress)
    : options_(std::move(options)), progress_(std::move(progress)) {
  if (options_.reps < 1) throw std::invalid_argument("--reps must be at least 1");
  if (options_.warmup < 0) throw std::invalid_argument("--warmup must be at least 0");
  if (!(options_.budget_ms > 0)) throw std::invalid_argument("--budget-ms must be positive");
  // The budget becomes a deadline in whole milliseconds (a 64-bit count): 1e19 overflowed it.
  if (!(options_.budget_ms <= 1e12)) throw std::invalid_argument("--budget-ms must be at most 1e12");
  if (!progress_) progress_ = [](const std::string&) {};
}

void bench_engine::add_platform(std::unique_ptr<platform> p) {
  if (p) platforms_.push_back(std::move(p));
}

bool bench_engine::has_backend(std::string_view backend) const {
  for (const auto& p : platforms_)
    for (const std::string& b : p->backends())
      if (b == backend) return true;
  return false;
}

bench_report bench_engine::run(const std::vector<tree_case>& trees, const std::vector<variant>& variants,
                               const std::string& backend, const std::string& backend_note) {
  bench_report report;
  report.backend = backend;
  report.backend_note = backend_note;
  report.options = options_;

  std::map<std::string, platform*> by_backend;
  for (const auto& p : platforms_)
    for (const std::string& b : p->backends()) by_backend.emplace(b, p.get());
  // Facts (and copy bandwidths, measured once) of the platforms some variant uses.
  std::vector<platform*> used;
  for (const variant& v : variants)
    if (auto it = by_backend.find(v.backend); it != by_backend.end() &&
                                              std::find(used.begin(), used.end(), it->second) == used.end())
      used.push_back(it->second);
  for (platform* p : used)
    for (platform_facts& f : p->facts(options_)) report.platforms.push_back(std::move(f));

  // A platform that lost its device (a sticky CUDA error) runs nothing more; the others go on.
  std::map<platform*, std::string> dead;
  // Once over budget, a variant stays skipped on every later tree; this says where it went over.
  std::vector<std::string> over_budget_at(variants.size());
  const double budget_us = options_.budget_ms * 1e3;
  const int runs_to_time = options_.warmup + options_.reps;

  for (const tree_case& tc : trees) {
    bench_entry base;
    base.tree = tc.label;
    base.complete = tc.complete;
    base.depth = tc.depth;
    base.per_leaf = tc.per_leaf;
    if (tc.complete) {
      base.nodes = complete_node_count(tc.depth);
      base.leaves = base.nodes == 0 ? 0 : (1LL << (3 * tc.depth));
      base.points = complete_point_count(tc.depth, tc.per_leaf);
    }
    const bool any_left = std::any_of(over_budget_at.begin(), over_budget_at.end(),
                                      [](const std::string& s) { return s.empty(); });
    if (!any_left) {
      // Nothing would run: do not spend seconds and gigabytes building the tree.
      for (std::size_t i = 0; i < variants.size(); ++i) {
        bench_entry e = base;
        e.variant = variants[i].name;
        e.backend = variants[i].backend;
        e.baseline = variants[i].baseline;
        e.over_budget = true;
        e.note = "over budget since " + over_budget_at[i];
        report.entries.push_back(std::move(e));
      }
      progress_(tc.label + ": every variant is over budget, tree not built");
      continue;
    }

    auto t0 = std::chrono::steady_clock::now();
    const trees::octree tree = tc.build();
    base.depth = tree.depth;
    base.nodes = tree.node_count();
    base.leaves = static_cast<long long>(tree.leaves.size());
    base.points = static_cast<long long>(tree.points.size());
    base.bytes = static_cast<double>(upward_pass_bytes(tree));
    progress_(tc.label + ": built, " + grouped(base.nodes) + " nodes, " + grouped(base.points) + " points (" +
              printf_string("%.1f ms", ms_since(t0)) + ")");
    t0 = std::chrono::steady_clock::now();
    const auto reference = trees::reference_upward_pass(tree);
    progress_(tc.label + ": reference upward pass (" + printf_string("%.1f ms", ms_since(t0)) + ")");

    std::vector<platform*> loaded;
    for (std::size_t i = 0; i < variants.size(); ++i) {
      if (!over_budget_at[i].empty()) continue;
      auto it = by_backend.find(variants[i].backend);
      if (it == by_backend.end() || dead.count(it->second) != 0 ||
          std::find(loaded.begin(), loaded.end(), it->second) != loaded.end())
        continue;
      t0 = std::chrono::steady_clock::now();
      it->second->load(tree, options_);
      loaded.push_back(it->second);
      progress_(tc.label + ": loaded on " + it->second->backends().front() + " (" + printf_string("%.1f ms", ms_since(t0)) + ")");
    }

    for (std::size_t i = 0; i < variants.size(); ++i) {
      const variant& v = variants[i];
      bench_entry e = base;
      e.variant = v.name;
      e.backend = v.backend;
      e.baseline = v.baseline;
      auto finish = [&](const std::string& verdict) {
        progress_(tc.label + ": " + v.name + (v.backend == backend || v.backend == backend_host ? "" : " (" + v.backend + ")") +
                  ": " + verdict);
        report.entries.push_back(e);
      };
      if (!over_budget_at[i].empty()) {
        e.over_budget = true;
        e.note = "over budget since " + over_budget_at[i];
        finish("skipped, " + e.note);
        continue;
      }
      const auto it = by_backend.find(v.backend);
      if (it == by_backend.end()) {
        e.note = v.backend == backend_gpu ? "needs a CUDA device" : "no " + v.backend + " backend in this build";
        finish("skipped, " + e.note);
        continue;
      }
      platform& p = *it->second;
      if (const auto d = dead.find(&p); d != dead.end()) {
        e.note = "not run: " + d->second;
        finish("skipped, " + e.note);
        continue;
      }
      // After a failure, a platform whose device is gone is marked so that nothing else runs on it.
      auto check_health = [&] {
        if (!p.healthy()) {
          dead[&p] = "the " + v.backend + " device failed at " + tc.label + " " + v.name;
          p.unload();
        }
      };
      const bool perturb = !options_.inject_wrong_result.empty() && options_.inject_wrong_result == v.name;
      auto over_budget = [&](const std::string& why) {
        e.status = entry_status::skipped;
        e.over_budget = true;
        e.note = "over budget: " + why;
        over_budget_at[i] = tc.label;
        finish("skipped, " + e.note);
      };
      try {
        auto runner = p.runner(v);
        run_outcome first = runner->run_once();
        e.first_run_us = first.elapsed_us;
        if (first.code == canopy::status::timeout) {
          over_budget("one run passed the " + printf_string("%g", options_.budget_ms) + " ms deadline");
          continue;
        }
        if (first.code != canopy::status::ok) {
          e.status = entry_status::fail;
          e.note = std::string(canopy::to_string(first.code)) + ": " + first.message;
          finish("FAIL, " + e.note);
          if (first.code == canopy::status::device_error) check_health();
          continue;
        }
        trees::comparison cmp = runner->check(tree, reference, perturb);
        if (!cmp.within_tolerance) {
          e.status = entry_status::fail;
          e.wrong_result = true;
          e.note = "wrong result: " + cmp.summary();
          finish("FAIL, " + e.note);
          continue;
        }
        // The first run may be cold (module load, first touch): before giving up on the budget,
        // look at one warm run.
        double estimate_us = first.elapsed_us;
        if (estimate_us * runs_to_time > budget_us && estimate_us < budget_us) {
          const run_outcome again = runner->run_once();
          if (again.code == canopy::status::ok) estimate_us = std::min(estimate_us, again.elapsed_us);
        }
        if (estimate_us * runs_to_time > budget_us) {
          over_budget("validated; one run takes " + human_us(estimate_us) + ", " + std::to_string(runs_to_time) +
                      " runs would pass the " + printf_string("%g", options_.budget_ms) + " ms budget");
          continue;
        }
        const timed_runs t = runner->time(options_.warmup, options_.reps);
        const summary& s = t.stream;
        // Checked again after the timed runs: an intermittent wrong result (a stale read) shows up
        // more often over many runs than in one.
        cmp = runner->check(tree, reference, perturb);
        if (!cmp.within_tolerance) {
          e.status = entry_status::fail;
          e.wrong_result = true;
          e.note = "wrong result after the timed runs: " + cmp.summary();
          finish("FAIL, " + e.note);
          continue;
        }
        e.status = entry_status::ok;
        e.reps = static_cast<int>(s.count);
        e.median_us = s.median;
        e.min_us = s.min;
        e.max_us = s.max;
        e.e2e_median_us = t.e2e.median;
        e.e2e_min_us = t.e2e.min;
        e.e2e_max_us = t.e2e.max;
        e.note = runner->detail().empty() ? cmp.summary() : runner->detail() + "; " + cmp.summary();
        finish("ok, median " + human_us(s.median) + " (min " + human_us(s.min) + ", max " + human_us(s.max) + ", " +
               std::to_string(s.count) + " runs; end to end " + human_us(t.e2e.median) + ")");
      } catch (const std::exception& ex) {
        e.status = entry_status::fail;
        e.wrong_result = false;
        e.note = ex.what();
        finish("FAIL, " + e.note);
        check_health();
      }
    }
    for (platform* p : loaded) p->unload();
  }
  finish_report(report);
  return report;
}

}  // namespace canopy::bench
