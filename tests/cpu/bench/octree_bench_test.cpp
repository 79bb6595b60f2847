// SPDX-License-Identifier: Apache-2.0
// The benchmark engine without a GPU: the --depths and --modes parsers, the byte count, the
// writers, and the engine's paths (validated and timed, wrong result, over budget, timeout) through
// a scripted platform and through the real host platform. No assertion depends on a measured time.
#include <algorithm>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <canopy/trees/octree.hpp>

#include "octree_bench.hpp"

namespace {

namespace cb = canopy::bench;
namespace trees = canopy::trees;

// ---- parsers --------------------------------------------------------------------------------------

TEST(parse_depth_list, ranges_and_lists) {
  EXPECT_EQ(cb::parse_depth_list("1-8"), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(cb::parse_depth_list("5"), (std::vector<int>{5}));
  EXPECT_EQ(cb::parse_depth_list("1,3,5-7"), (std::vector<int>{1, 3, 5, 6, 7}));
  EXPECT_EQ(cb::parse_depth_list(" 7 , 2-3 ,3"), (std::vector<int>{2, 3, 7}));  // sorted, each once
  EXPECT_EQ(cb::parse_depth_list("0-0"), (std::vector<int>{0}));
  EXPECT_EQ(cb::parse_depth_list("21"), (std::vector<int>{21}));
}

TEST(parse_depth_list, rejects_bad_items_naming_them) {
  for (const char* bad : {"", " ", "8-1", "a", "1-", "-3", "1,,2", "22", "1-22", "3.5", "1-2-3", "2x"}) {
    try {
      cb::parse_depth_list(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--depths: ", 0), 0u) << e.what();
    }
  }
  EXPECT_THROW(cb::parse_depth_list("5", 4), std::invalid_argument);
}

std::vector<std::string> names(const std::vector<cb::variant>& vs) {
  std::vector<std::string> out;
  for (const auto& v : vs) out.push_back(v.name + "@" + v.backend);
  return out;
}

TEST(parse_variant_list, defaults_per_backend) {
  const auto gpu = cb::default_variants("gpu");
  constexpr std::size_t modes = canopy::mode_count;
  ASSERT_EQ(gpu.size(), modes + 3u + 3u + 2u);  // modes, three on twig tasks, GPU baselines, reference, cpu:continuation
  EXPECT_EQ(gpu.front().name, "mutex");
  EXPECT_EQ(gpu.front().backend, "gpu");
  EXPECT_FALSE(gpu.front().baseline);
  EXPECT_EQ(names(gpu).back(), "cpu:continuation@cpu");
  EXPECT_TRUE(gpu.back().baseline);
  const auto cpu = cb::default_variants("cpu");
  ASSERT_EQ(cpu.size(), modes + 3u + 1u);  // modes on the cpu backend, three on twig tasks, reference
  EXPECT_EQ(names(cpu)[modes], "lockfree-tree+twig@cpu");
  EXPECT_EQ(names(cpu)[modes + 1], "continuation+twig@cpu");
  EXPECT_EQ(names(cpu)[modes + 2], "warp-rounds+twig@cpu");
  EXPECT_EQ(cpu[modes + 1].tasks, canopy::trees::pass_tasks::twig);
  EXPECT_EQ(names(cpu).front(), "mutex@cpu");
  EXPECT_EQ(names(cpu).back(), "reference@host");
  EXPECT_EQ(names(cb::parse_variant_list("", "cpu")), names(cpu));
  EXPECT_EQ(names(cb::parse_variant_list("all", "gpu")), names(gpu));
}

TEST(parse_variant_list, names_aliases_and_duplicates) {
  EXPECT_EQ(names(cb::parse_variant_list("continuation, level-graph,reference,cpu,continuation", "gpu")),
            (std::vector<std::string>{"continuation@gpu", "level-graph@gpu", "reference@host", "cpu:continuation@cpu"}));
  // On the cpu backend, cpu:MODE is MODE.
  EXPECT_EQ(names(cb::parse_variant_list("cpu:mutex,mutex", "cpu")), (std::vector<std::string>{"mutex@cpu"}));
  EXPECT_EQ(cb::parse_variant_list("modes", "gpu").size(), canopy::mode_count);
  EXPECT_EQ(names(cb::parse_variant_list("baselines", "cpu")), (std::vector<std::string>{"reference@host"}));
  const auto v = cb::parse_variant_list("lockfree", "gpu");
  ASSERT_TRUE(v.front().mode.has_value());
  EXPECT_EQ(*v.front().mode, canopy::mode::lockfree);
  EXPECT_EQ(v.front().tasks, canopy::trees::pass_tasks::node);
  // MODE+twig: the same mode over twig tasks; "twigs": every mode over twig tasks.
  const auto t = cb::parse_variant_list("continuation+twig,continuation", "gpu");
  EXPECT_EQ(names(t), (std::vector<std::string>{"continuation+twig@gpu", "continuation@gpu"}));
  EXPECT_EQ(t[0].tasks, canopy::trees::pass_tasks::twig);
  EXPECT_EQ(*t[0].mode, canopy::mode::continuation);
  EXPECT_EQ(cb::parse_variant_list("twigs", "cpu").size(), canopy::mode_count);
  for (const char* bad : {"bogus", "cpu:bogus", "mutex,,lockfree", "Mutex", "bogus+twig", "+twig"}) {
    try {
      cb::parse_variant_list(bad, "gpu");
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--modes: ", 0), 0u) << e.what();
    }
  }
}

TEST(sizes, complete_tree_counts_and_bytes) {
  EXPECT_EQ(cb::complete_node_count(0), 1);
  EXPECT_EQ(cb::complete_node_count(5), 37449);
  EXPECT_EQ(cb::complete_point_count(8, 8), 134217728LL);
  EXPECT_GT(cb::complete_point_count(11, 8), 2147483647LL);
  const trees::octree t = trees::build_complete_octree(2, 8, 1);
  EXPECT_EQ(t.node_count(), cb::complete_node_count(2));
  EXPECT_EQ(cb::upward_pass_bytes(t), 512 * sizeof(trees::point) + (2 * 73 - 1) * sizeof(trees::multipole<float>));
}

// ---- writers --------------------------------------------------------------------------------------

cb::bench_entry entry(const std::string& tree, const std::string& mode, bool baseline, double median) {
  cb::bench_entry e;
  e.tree = tree;
  e.depth = 1;
  e.per_leaf = 8;
  e.nodes = 9;
  e.leaves = 8;
  e.points = 64;
  e.bytes = 1e6;
  e.variant = mode;
  e.backend = mode == "reference" ? "host" : "cpu";
  e.baseline = baseline;
  if (median > 0) {
    e.status = cb::entry_status::ok;
    e.median_us = median;
    e.min_us = median * 0.9;
    e.max_us = median * 1.2;
    // End to end: the host's one clock, else half as much again (a wait for the result).
    const double e2e = e.backend == "host" ? median : median * 1.5;
    e.e2e_median_us = e2e;
    e.e2e_min_us = e2e * 0.9;
    e.e2e_max_us = e2e * 1.2;
    e.reps = 20;
    e.note = "counts ok";
  }
  return e;
}

cb::bench_report sample_report() {
  cb::bench_report r;
  r.backend = "cpu";
  r.backend_note = "no CUDA device: the scheduler modes run on the cpu backend";
  r.platforms.push_back({"cpu", "2 CPU workers", 0, "", 10.0, "memcpy"});
  r.platforms.push_back({"host", "1 host thread", 0, "", 10.0, "memcpy"});
  r.entries.push_back(entry("depth 1", "mutex", false, 400));
  r.entries.push_back(entry("depth 1", "continuation", false, 100));
  r.entries.push_back(entry("depth 1", "reference", true, 200));
  auto failed = entry("depth 2", "mutex", false, 0);
  failed.status = cb::entry_status::fail;
  failed.wrong_result = true;
  failed.note = "wrong result: mass 1e-2, bound 1e-5";
  r.entries.push_back(failed);
  auto skipped = entry("depth 2", "continuation", false, 0);
  skipped.over_budget = true;
  skipped.note = "over budget: one run takes 3 ms, \"23\" runs";
  r.entries.push_back(skipped);
  r.entries.push_back(entry("depth 2", "reference", true, 800));
  cb::finish_report(r);
  return r;
}

TEST(report, derived_fields) {
  const auto r = sample_report();
  const auto& cont = r.entries[1];
  EXPECT_DOUBLE_EQ(cont.speedup_vs_mutex, 4.0);
  EXPECT_DOUBLE_EQ(cont.speedup_vs_best_baseline, 2.0);
  EXPECT_EQ(cont.best_baseline, "reference");
  EXPECT_DOUBLE_EQ(cont.e2e_speedup_vs_best_baseline, 200.0 / 150.0);  // each clock against its own best
  EXPECT_EQ(cont.best_e2e_baseline, "reference");
  EXPECT_DOUBLE_EQ(cont.gb_per_s, 10.0);  // 1e6 bytes in 100 us
  EXPECT_DOUBLE_EQ(cont.percent_of_copy, 100.0);
  EXPECT_EQ(r.entries[5].speedup_vs_mutex, 0.0);  // mutex failed on depth 2: no ratio
  EXPECT_TRUE(r.any_wrong_result());
  EXPECT_FALSE(r.any_run_failed());
}

TEST(report, table_shows_every_entry_and_the_summary) {
  std::ostringstream out;
  cb::print_table(sample_report(), out);
  const std::string s = out.str();
  for (const char* want : {"2 CPU workers", "no CUDA device", "depth 1: 9 nodes", "continuation", "reference *",
                           "4.00", "FAIL (wrong result", "skipped (over budget", "median us by tree", "budget",
                           "result: FAIL"})
    EXPECT_NE(s.find(want), std::string::npos) << "missing '" << want << "' in\n" << s;
}

TEST(report, json_is_self_describing) {
  std::ostringstream out;
  cb::write_json(sample_report(), out);
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["schema"], "canopy-bench-octree/1");
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["device"]["name"], "2 CPU workers");
  EXPECT_DOUBLE_EQ(j["copy_bandwidth_gb_per_s"].get<double>(), 10.0);
  ASSERT_EQ(j["results"].size(), 6u);
  const auto& ok = j["results"][1];
  for (const auto& [key, _] : j["fields"].items()) EXPECT_TRUE(ok.contains(key)) << key;
  EXPECT_EQ(ok["mode"], "continuation");
  EXPECT_EQ(ok["status"], "ok");
  EXPECT_DOUBLE_EQ(ok["median_us"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(ok["e2e_median_us"].get<double>(), 150.0);
  EXPECT_DOUBLE_EQ(ok["e2e_speedup_vs_best_baseline"].get<double>(), 200.0 / 150.0);
  EXPECT_DOUBLE_EQ(ok["speedup_vs_mutex"].get<double>(), 4.0);
  const auto& bad = j["results"][3];
  EXPECT_EQ(bad["status"], "fail");
  EXPECT_TRUE(bad["wrong_result"].get<bool>());
  EXPECT_TRUE(bad["median_us"].is_null());  // a wrong result is never timed
  EXPECT_EQ(j["results"][4]["status"], "skipped");
  EXPECT_TRUE(j["results"][4]["over_budget"].get<bool>());
}

TEST(report, csv_has_a_header_and_a_line_per_entry) {
  std::ostringstream out;
  cb::write_csv(sample_report(), out);
  std::istringstream in(out.str());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0].rfind("tree,tree_kind,depth,per_leaf,nodes,leaves,points,bytes,mode,backend,", 0), 0u) << lines[0];
  EXPECT_NE(lines[2].find("depth 1,complete,1,8,9,8,64,"), std::string::npos) << lines[2];
  // A note with a comma and quotes is one quoted field.
  EXPECT_NE(lines[5].find("\"over budget: one run takes 3 ms, \"\"23\"\" runs\""), std::string::npos) << lines[5];
}

// ---- the engine, through a scripted platform ------------------------------------------------------

// Each variant's behaviour per depth: what run_once reports, whether the check passes.
struct script {
  canopy::status code = canopy::status::ok;
  double elapsed_us = 10;
  bool correct = true;
};

struct script_log {
  std::map<std::string, int> runs, timed, checks;
  int loads = 0;
};

class scripted_runner final : public cb::pass_runner {
 public:
  scripted_runner(script s, std::string name, script_log& log) : s_(s), name_(std::move(name)), log_(log) {}
  cb::run_outcome run_once() override {
    ++log_.runs[name_];
    return {s_.code, s_.code == canopy::status::ok ? "" : "scripted", s_.elapsed_us};
  }
  trees::comparison check(const trees::octree&, std::span<const trees::multipole<double>>, bool perturb) override {
    ++log_.checks[name_];
    trees::comparison c;
    c.within_tolerance = s_.correct && !perturb;
    return c;
  }
  cb::timed_runs time(int, int reps) override {
    ++log_.timed[name_];
    const cb::summary t1{s_.elapsed_us, s_.elapsed_us, s_.elapsed_us, static_cast<std::size_t>(reps)};
    const cb::summary t2{2 * s_.elapsed_us, 2 * s_.elapsed_us, 2 * s_.elapsed_us, static_cast<std::size_t>(reps)};
    return {t1, t2};
  }

 private:
  script s_;
  std::string name_;
  script_log& log_;
};

class scripted_platform final : public cb::platform {
 public:
  using rule = std::function<script(const std::string& variant, int depth)>;
  scripted_platform(rule r, script_log& log) : rule_(std::move(r)), log_(log) {}
  std::vector<std::string> backends() const override { return {"cpu", "host"}; }
  std::vector<cb::platform_facts> facts(const cb::bench_options&) override {
    return {{"cpu", "scripted", 0, "", 1.0, "none"}};
  }
  void load(const trees::octree& t, const cb::bench_options&) override {
    depth_ = t.depth;
    ++log_.loads;
  }
  void unload() override {}
  std::unique_ptr<cb::pass_runner> runner(const cb::variant& v) override {
    const script s = rule_(v.name, depth_);
    if (s.code == canopy::status::device_error) alive_ = false;  // as a sticky CUDA error would
    return std::make_unique<scripted_runner>(s, v.name, log_);
  }
  bool healthy() override { return alive_; }

 private:
  bool alive_ = true;
  rule rule_;
  script_log& log_;
  int depth_ = 0;
};

std::vector<cb::tree_case> complete_trees(int from, int to, int* builds) {
  std::vector<cb::tree_case> out;
  for (int d = from; d <= to; ++d)
    out.push_back({"depth " + std::to_string(d), true, d, 1, [d, builds] {
                     ++*builds;
                     return trees::build_complete_octree(d, 1, 1);
                   }});
  return out;
}

const cb::bench_entry& find(const cb::bench_report& r, const std::string& tree, const std::string& mode) {
  for (const auto& e : r.entries)
    if (e.tree == tree && e.variant == mode) return e;
  throw std::runtime_error("no entry " + tree + "/" + mode);
}

TEST(bench_engine, over_budget_skips_this_and_every_deeper_tree) {
  script_log log;
  // "slow" takes 1 ms per run from depth 2 on: 3 + 20 runs = 23 ms, over a 10 ms budget.
  auto rule = [](const std::string& v, int depth) {
    return script{canopy::status::ok, v == "slow" && depth >= 2 ? 1000.0 : 10.0, true};
  };
  cb::bench_options o;
  o.budget_ms = 10;
  cb::bench_engine engine(o);
  engine.add_platform(std::make_unique<scripted_platform>(rule, log));
  int builds = 0;
  const std::vector<cb::variant> vs{{"slow", "cpu", false, canopy::mode::mutex}, {"fast", "cpu", false, canopy::mode::lockfree}};
  const auto r = engine.run(complete_trees(1, 4, &builds), vs, "cpu");
  ASSERT_EQ(r.entries.size(), 8u);
  EXPECT_EQ(find(r, "depth 1", "slow").status, cb::entry_status::ok);
  const auto& at2 = find(r, "depth 2", "slow");
  EXPECT_EQ(at2.status, cb::entry_status::skipped);
  EXPECT_TRUE(at2.over_budget);
  EXPECT_NE(at2.note.find("over budget"), std::string::npos) << at2.note;
  for (const char* t : {"depth 3", "depth 4"}) {
    const auto& e = find(r, t, "slow");
    EXPECT_EQ(e.status, cb::entry_status::skipped);
    EXPECT_TRUE(e.over_budget);
    EXPECT_NE(e.note.find("since depth 2"), std::string::npos) << e.note;
    EXPECT_EQ(find(r, t, "fast").status, cb::entry_status::ok);
  }
  // Validated at depth 2 (the first run and one warm run to confirm), never run again after.
  EXPECT_EQ(log.runs["slow"], 1 + 2);
  EXPECT_EQ(log.timed["slow"], 1);
  EXPECT_EQ(builds, 4);
  EXPECT_FALSE(r.any_wrong_result());
}

TEST(bench_engine, a_tree_nobody_runs_on_is_not_built) {
  script_log log;
  auto rule = [](const std::string&, int) { return script{canopy::status::timeout, 5e6, true}; };
  cb::bench_engine engine(cb::bench_options{});
  engine.add_platform(std::make_unique<scripted_platform>(rule, log));
  int builds = 0;
  const auto r = engine.run(complete_trees(1, 3, &builds), {{"stuck", "cpu", false, canopy::mode::mutex}}, "cpu");
  ASSERT_EQ(r.entries.size(), 3u);
  EXPECT_EQ(builds, 1);  // depth 1 timed out; depths 2 and 3 were never built
  EXPECT_NE(r.entries[0].note.find("deadline"), std::string::npos) << r.entries[0].note;
  for (const auto& e : r.entries) {
    EXPECT_EQ(e.status, cb::entry_status::skipped);
    EXPECT_TRUE(e.over_budget);
  }
  EXPECT_EQ(r.entries[2].nodes, cb::complete_node_count(3));  // sizes known without building
}

TEST(bench_engine, a_wrong_result_fails_and_is_never_timed) {
  script_log log;
  auto rule = [](const std::string& v, int) { return script{canopy::status::ok, 10, v != "broken"}; };
  cb::bench_engine engine(cb::bench_options{});
  engine.add_platform(std::make_unique<scripted_platform>(rule, log));
  int builds = 0;
  const auto r = engine.run(complete_trees(1, 2, &builds),
                            {{"broken", "cpu", false, canopy::mode::mutex}, {"good", "cpu", false, canopy::mode::lockfree}},
                            "cpu");
  const auto& e = find(r, "depth 2", "broken");
  EXPECT_EQ(e.status, cb::entry_status::fail);
  EXPECT_TRUE(e.wrong_result);
  EXPECT_EQ(e.median_us, 0.0);
  EXPECT_EQ(log.timed["broken"], 0);
  EXPECT_EQ(find(r, "depth 2", "good").status, cb::entry_status::ok);
  EXPECT_TRUE(r.any_wrong_result());
}

TEST(bench_engine, a_failed_run_is_a_failure_not_a_wrong_result) {
  script_log log;
  auto rule = [](const std::string&, int) { return script{canopy::status::queue_overflow, 10, true}; };
  cb::bench_engine engine(cb::bench_options{});
  engine.add_platform(std::make_unique<scripted_platform>(rule, log));
  int builds = 0;
  const auto r = engine.run(complete_trees(1, 1, &builds), {{"m", "cpu", false, canopy::mode::mutex}}, "cpu");
  ASSERT_EQ(r.entries.size(), 1u);
  EXPECT_EQ(r.entries[0].status, cb::entry_status::fail);
  EXPECT_FALSE(r.any_wrong_result());
  EXPECT_TRUE(r.any_run_failed());
  EXPECT_NE(r.entries[0].note.find("queue overflow"), std::string::npos) << r.entries[0].note;
}

TEST(bench_engine, a_lost_device_runs_nothing_more_and_the_rest_is_reported) {
  script_log log;
  auto rule = [](const std::string& v, int) {
    return script{v == "crash" ? canopy::status::device_error : canopy::status::ok, 10, true};
  };
  cb::bench_engine engine(cb::bench_options{});
  engine.add_platform(std::make_unique<scripted_platform>(rule, log));
  int builds = 0;
  const auto r = engine.run(complete_trees(1, 2, &builds),
                            {{"crash", "cpu", false, canopy::mode::mutex}, {"after", "cpu", false, canopy::mode::lockfree}},
                            "cpu");
  ASSERT_EQ(r.entries.size(), 4u);
  EXPECT_EQ(find(r, "depth 1", "crash").status, cb::entry_status::fail);
  for (const auto& [t, m] : {std::pair{"depth 1", "after"}, {"depth 2", "crash"}, {"depth 2", "after"}}) {
    const auto& e = find(r, t, m);
    EXPECT_EQ(e.status, cb::entry_status::skipped) << t << " " << m;
    EXPECT_NE(e.note.find("device failed at depth 1 crash"), std::string::npos) << e.note;
  }
  EXPECT_EQ(log.runs["after"], 0);
  EXPECT_TRUE(r.any_run_failed());
  EXPECT_FALSE(r.any_wrong_result());
}

TEST(bench_engine, a_backend_without_platform_is_skipped_with_a_reason) {
  script_log log;
  auto rule = [](const std::string&, int) { return script{}; };
  cb::bench_engine engine(cb::bench_options{});
  engine.add_platform(std::make_unique<scripted_platform>(rule, log));
  int builds = 0;
  const auto r = engine.run(complete_trees(1, 1, &builds), {{"level-graph", "gpu", true, std::nullopt}}, "cpu");
  ASSERT_EQ(r.entries.size(), 1u);
  EXPECT_EQ(r.entries[0].status, cb::entry_status::skipped);
  EXPECT_FALSE(r.entries[0].over_budget);
  EXPECT_NE(r.entries[0].note.find("CUDA device"), std::string::npos);
}

// ---- the engine on the real host platform ---------------------------------------------------------

TEST(bench_engine_host, every_cpu_mode_and_the_reference_validate) {
  cb::bench_options o;
  o.reps = 3;
  o.warmup = 1;
  o.cpu_workers = 2;
  o.budget_ms = 60000;  // generous: a loaded CI machine must not turn this into a skip
  std::vector<std::string> progress;
  cb::bench_engine engine(o, [&](const std::string& line) { progress.push_back(line); });
  engine.add_platform(cb::make_host_platform());
  int builds = 0;
  const auto trees_to_run = complete_trees(1, 3, &builds);
  const auto r = engine.run(trees_to_run, cb::default_variants("cpu"), "cpu");
  ASSERT_EQ(r.entries.size(), 3u * (canopy::mode_count + 4u));  // every mode, 3 on twig tasks, the reference; 3 trees
  for (const auto& e : r.entries) {
    EXPECT_EQ(e.status, cb::entry_status::ok) << e.tree << " " << e.variant << ": " << e.note;
    EXPECT_EQ(e.reps, 3);
    EXPECT_LE(e.min_us, e.median_us);
    EXPECT_LE(e.median_us, e.max_us);
  }
  EXPECT_NE(r.facts("cpu"), nullptr);
  EXPECT_EQ(r.facts("cpu")->device, "2 CPU workers");
  EXPECT_FALSE(progress.empty());
}

TEST(bench_engine_host, an_injected_wrong_result_fails) {
  cb::bench_options o;
  o.reps = 3;
  o.warmup = 0;
  o.budget_ms = 60000;
  o.inject_wrong_result = "lockfree";
  cb::bench_engine engine(o);
  engine.add_platform(cb::make_host_platform());
  int builds = 0;
  const auto r = engine.run(complete_trees(2, 2, &builds), cb::parse_variant_list("lockfree,continuation", "cpu"), "cpu");
  EXPECT_EQ(find(r, "depth 2", "lockfree").status, cb::entry_status::fail);
  EXPECT_TRUE(find(r, "depth 2", "lockfree").wrong_result);
  EXPECT_NE(find(r, "depth 2", "lockfree").note.find("wrong result"), std::string::npos);
  EXPECT_EQ(find(r, "depth 2", "continuation").status, cb::entry_status::ok);
}

}  // namespace
