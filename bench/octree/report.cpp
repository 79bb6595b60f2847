// SPDX-License-Identifier: Apache-2.0
// The benchmark's outputs: the terminal table, JSON and CSV. The file formats are documented in
// README.md beside this file; the JSON carries its own field descriptions.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/text.hpp"
#include "octree_bench.hpp"

namespace canopy::bench {

namespace {

// Microseconds with as many decimals as a person can use: 3.14, 51.2, 4660.
std::string us_text(double us) {
  if (us < 100) return printf_string("%.2f", us);
  if (us < 10000) return printf_string("%.1f", us);
  return printf_string("%.0f", us);
}

std::string bytes_text(double b) {
  if (b >= 1e9) return printf_string("%.2f GB", b / 1e9);
  if (b >= 1e6) return printf_string("%.1f MB", b / 1e6);
  if (b >= 1e3) return printf_string("%.1f kB", b / 1e3);
  return printf_string("%.0f B", b);
}

std::string status_text(const bench_entry& e) {
  switch (e.status) {
    case entry_status::ok: return "ok";
    case entry_status::fail: return "FAIL (" + e.note + ")";
    case entry_status::skipped: return "skipped (" + e.note + ")";
  }
  return "?";
}

// The summary's cell: the median, or why there is none.
std::string short_cell(const bench_entry& e) {
  if (e.status == entry_status::ok)
    return e.e2e_median_us > 0 && e.e2e_median_us != e.median_us ? us_text(e.median_us) + " / " + us_text(e.e2e_median_us)
                                                                 : us_text(e.median_us);
  if (e.status == entry_status::fail) return "FAIL";
  return e.over_budget ? "budget" : "-";
}

// Prints rows of cells, each column as wide as its widest cell; the first `left` columns and the
// last column are left-aligned, the others right-aligned (numbers).
void print_aligned(std::ostream& out, const std::vector<std::vector<std::string>>& rows, std::size_t left,
                   const std::string& indent = "") {
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) {
      if (width.size() <= c) width.resize(c + 1, 0);
      width[c] = std::max(width[c], r[c].size());
    }
  for (const auto& r : rows) {
    std::string line = indent;
    for (std::size_t c = 0; c < r.size(); ++c) {
      const bool last = c + 1 == r.size();
      const std::size_t pad = width[c] - r[c].size();
      if (c < left || last) line += r[c] + (last ? "" : std::string(pad, ' '));
      else line += std::string(pad, ' ') + r[c];
      if (!last) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

nlohmann::json positive_or_null(double v) { return v > 0 && std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

const char* const entry_fields[][2] = {
    {"tree", "the tree: 'depth D' for a complete octree, else its source and build options"},
    {"tree_kind", "complete | adaptive"},
    {"depth", "deepest level (root is 0)"},
    {"per_leaf", "points per leaf of a complete octree; null for an adaptive one"},
    {"nodes", "nodes (= tasks)"},
    {"leaves", "leaves"},
    {"points", "points"},
    {"bytes", "bytes a pass must move: points read once, payloads written once, children read once"},
    {"mode", "scheduler mode (mutex ... continuation), baseline (level-kernels, level-graph, last-arriver, "
             "reference) or cpu:MODE (the cpu backend as a baseline beside the GPU)"},
    {"backend", "gpu | cpu | host (the serial reference)"},
    {"baseline", "true for what a user would run instead of the scheduler"},
    {"status", "ok | fail (wrong result or failed run; no time counted) | skipped (see note)"},
    {"over_budget", "skipped because one run, or warm-up plus the timed runs, would pass budget_ms"},
    {"wrong_result", "the result differed from the reference beyond the tolerance"},
    {"reps", "timed runs"},
    {"median_us", "stream time (T1) of one pass, median, microseconds (gpu: CUDA events around the enqueue, no host "
                  "wait between them; cpu and host: the host clock of the call)"},
    {"min_us", "fastest timed run (stream time)"},
    {"max_us", "slowest timed run (stream time)"},
    {"e2e_median_us", "end-to-end time (T2), median: host clock from the call until the host knows the result "
                      "(gpu: the stream synchronised, the scheduler's status read), of the same runs"},
    {"e2e_min_us", "fastest timed run (end to end)"},
    {"e2e_max_us", "slowest timed run (end to end)"},
    {"first_run_us", "the validation run (cold: includes first-launch costs)"},
    {"gb_per_s", "bytes / median_us, 1e9 bytes per second"},
    {"percent_of_copy", "gb_per_s / the backend's measured copy bandwidth * 100"},
    {"speedup_vs_mutex", "median of mode mutex (same tree and backend) / median_us"},
    {"speedup_vs_best_baseline", "median of the fastest validated baseline on this tree / median_us (stream time)"},
    {"best_baseline", "that baseline"},
    {"e2e_speedup_vs_best_baseline", "the same on end-to-end time: the fastest baseline by e2e_median_us / e2e_median_us"},
    {"best_e2e_baseline", "that baseline"},
    {"note", "why it failed or was skipped; for ok: the worst validation errors"},
};

nlohmann::json entry_json(const bench_entry& e) {
  const bool ok = e.status == entry_status::ok;
  return nlohmann::json{
      {"tree", e.tree},
      {"tree_kind", e.complete ? "complete" : "adaptive"},
      {"depth", e.depth},
      {"per_leaf", e.complete ? nlohmann::json(e.per_leaf) : nlohmann::json()},
      {"nodes", e.nodes},
      {"leaves", e.leaves},
      {"points", e.points},
      {"bytes", positive_or_null(e.bytes)},
      {"mode", e.variant},
      {"backend", e.backend},
      {"baseline", e.baseline},
      {"status", to_string(e.status)},
      {"over_budget", e.over_budget},
      {"wrong_result", e.wrong_result},
      {"reps", e.reps},
      {"median_us", ok ? nlohmann::json(e.median_us) : nlohmann::json()},
      {"min_us", ok ? nlohmann::json(e.min_us) : nlohmann::json()},
      {"max_us", ok ? nlohmann::json(e.max_us) : nlohmann::json()},
      {"e2e_median_us", ok ? positive_or_null(e.e2e_median_us) : nlohmann::json()},
      {"e2e_min_us", ok ? positive_or_null(e.e2e_min_us) : nlohmann::json()},
      {"e2e_max_us", ok ? positive_or_null(e.e2e_max_us) : nlohmann::json()},
      {"first_run_us", positive_or_null(e.first_run_us)},
      {"gb_per_s", positive_or_null(e.gb_per_s)},
      {"percent_of_copy", positive_or_null(e.percent_of_copy)},
      {"speedup_vs_mutex", positive_or_null(e.speedup_vs_mutex)},
      {"speedup_vs_best_baseline", positive_or_null(e.speedup_vs_best_baseline)},
      {"best_baseline", e.best_baseline.empty() ? nlohmann::json() : nlohmann::json(e.best_baseline)},
      {"e2e_speedup_vs_best_baseline", positive_or_null(e.e2e_speedup_vs_best_baseline)},
      {"best_e2e_baseline", e.best_e2e_baseline.empty() ? nlohmann::json() : nlohmann::json(e.best_e2e_baseline)},
      {"note", e.note},
  };
}

std::string csv_field(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (v.is_number_float()) return printf_string("%.6g", v.get<double>());
  if (v.is_number()) return v.dump();
  std::string s = v.get<std::string>();
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace

void print_table(const bench_report& report, std::ostream& out) {
  out << "canopy bench: the octree upward pass; every result checked against the double-precision CPU "
         "reference before it is timed\n";
  std::vector<std::vector<std::string>> head;
  for (const platform_facts& f : report.platforms) {
    std::string what = f.device;
    if (f.sm_count > 0) what += ", " + std::to_string(f.sm_count) + " SMs";
    if (!f.driver.empty()) what += " (" + f.driver + ")";
    if (f.copy_gb_per_s > 0) what += "; copy bandwidth " + printf_string("%.1f", f.copy_gb_per_s) + " GB/s (" + f.copy_method + ")";
    head.push_back({f.backend, what});
  }
  if (!report.backend_note.empty()) head.push_back({"note", report.backend_note});
  const bench_options& o = report.options;
  head.push_back({"timing", "median of " + std::to_string(o.reps) + " runs after " + std::to_string(o.warmup) +
                                " warm-up runs, min and max of the same runs; gpu: stream time = CUDA events around "
                                "the enqueue with no host wait inside (run_async, a baseline's launches), e2e = host "
                                "clock until the host knows the result (stream synchronised, status read), from a "
                                "second run without events; each run starts on an idle device; cpu and host: "
                                "std::chrono::steady_clock, one clock"});
  head.push_back({"budget", printf_string("%g", o.budget_ms) +
                                " ms per variant and tree (validation, warm-up and timed runs); a variant over "
                                "it is skipped on that tree and every later one"});
  print_aligned(out, head, 2);

  std::vector<std::string> tree_order;
  for (std::size_t begin = 0; begin < report.entries.size();) {
    const bench_entry& first = report.entries[begin];
    tree_order.push_back(first.tree);
    std::size_t end = begin;
    while (end < report.entries.size() && report.entries[end].tree == first.tree) ++end;
    out << "\n" << first.tree;
    if (first.nodes > 0) {
      out << ": " << grouped(first.nodes) << " nodes, " << grouped(first.points) << " points";
      if (first.complete) out << " (" << first.per_leaf << " per leaf)";
      else out << ", depth " << first.depth;
      if (first.bytes > 0) out << ", " << bytes_text(first.bytes) << " per pass";
    }
    out << "\n";
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"mode", "backend", "stream us", "min us", "max us", "e2e us", "e2e min-max", "x mutex",
                    "x best baseline", "x best (e2e)", "GB/s", "% copy", "status"});
    for (std::size_t i = begin; i < end; ++i) {
      const bench_entry& e = report.entries[i];
      const bool ok = e.status == entry_status::ok;
      auto num = [&](double v, const char* fmt) { return ok && v > 0 ? printf_string(fmt, v) : std::string("-"); };
      const bool e2e = ok && e.e2e_median_us > 0;
      rows.push_back({e.variant + (e.baseline ? " *" : ""), e.backend, ok ? us_text(e.median_us) : "-",
                      ok ? us_text(e.min_us) : "-", ok ? us_text(e.max_us) : "-", e2e ? us_text(e.e2e_median_us) : "-",
                      e2e ? us_text(e.e2e_min_us) + "-" + us_text(e.e2e_max_us) : "-", num(e.speedup_vs_mutex, "%.2f"),
                      num(e.speedup_vs_best_baseline, "%.2f"), num(e.e2e_speedup_vs_best_baseline, "%.2f"), num(e.gb_per_s, "%.2f"),
                      num(e.percent_of_copy, "%.1f%%"), status_text(e)});
    }
    print_aligned(out, rows, 2, "  ");
    if (!first.best_baseline.empty()) {
      for (std::size_t i = begin; i < end; ++i)
        if (report.entries[i].variant == first.best_baseline && report.entries[i].status == entry_status::ok)
          out << "  best baseline: " << first.best_baseline << " (" << us_text(report.entries[i].median_us) << " us stream)\n";
      if (first.best_e2e_baseline != first.best_baseline)
        for (std::size_t i = begin; i < end; ++i)
          if (report.entries[i].variant == first.best_e2e_baseline && report.entries[i].status == entry_status::ok)
            out << "  best baseline end to end: " << first.best_e2e_baseline << " (" << us_text(report.entries[i].e2e_median_us)
                << " us)\n";
    }
    begin = end;
  }

  // The summary: median microseconds, one line per variant, one column per tree.
  if (!tree_order.empty()) {
    out << "\nmedian us by tree, stream / end to end where they differ (* baseline; budget = over the time budget; "
           "- = not run)\n";
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> header{"mode"};
    for (const std::string& t : tree_order) header.push_back(t);
    rows.push_back(header);
    std::vector<std::string> names;
    for (const bench_entry& e : report.entries) {
      const std::string key = e.variant + (e.baseline ? " *" : "");
      if (std::find(names.begin(), names.end(), key) == names.end()) names.push_back(key);
    }
    for (const std::string& name : names) {
      std::vector<std::string> row{name};
      for (const std::string& t : tree_order) {
        std::string cell = "-";
        for (const bench_entry& e : report.entries)
          if (e.tree == t && e.variant + (e.baseline ? " *" : "") == name) cell = short_cell(e);
        row.push_back(cell);
      }
      row.push_back("");  // keeps the last tree's column right-aligned
      rows.push_back(row);
    }
    rows.front().push_back("");
    print_aligned(out, rows, 1, "  ");
  }
  out << "\n(* = baseline; x mutex = mutex median / this median; x best baseline = fastest baseline's median / "
         "this median, stream time; x best (e2e) = the same end to end)\n";
  if (report.any_wrong_result()) out << "result: FAIL, some results differ from the reference\n";
}

void write_json(const bench_report& report, std::ostream& out) {
  nlohmann::json doc;
  doc["schema"] = "canopy-bench-octree/1";
  doc["benchmark"] = "octree upward pass, every scheduler mode and baseline on each tree";
  doc["backend"] = report.backend;
  doc["backend_note"] = report.backend_note;
  const platform_facts* main = report.facts(report.backend);
  nlohmann::json device = nlohmann::json::object();
  if (main != nullptr) {
    device = {{"name", main->device},
              {"sm_count", main->sm_count > 0 ? nlohmann::json(main->sm_count) : nlohmann::json()},
              {"driver", main->driver.empty() ? nlohmann::json() : nlohmann::json(main->driver)}};
  }
  doc["device"] = device;
  doc["copy_bandwidth_gb_per_s"] = main != nullptr ? positive_or_null(main->copy_gb_per_s) : nlohmann::json();
  nlohmann::json platforms = nlohmann::json::array();
  for (const platform_facts& f : report.platforms)
    platforms.push_back({{"backend", f.backend},
                         {"device", f.device},
                         {"sm_count", f.sm_count > 0 ? nlohmann::json(f.sm_count) : nlohmann::json()},
                         {"driver", f.driver.empty() ? nlohmann::json() : nlohmann::json(f.driver)},
                         {"copy_bandwidth_gb_per_s", positive_or_null(f.copy_gb_per_s)},
                         {"copy_method", f.copy_method}});
  doc["platforms"] = platforms;
  doc["git_commit"] = report.git_commit.empty() ? nlohmann::json() : nlohmann::json(report.git_commit);
  const bench_options& o = report.options;
  doc["options"] = {{"reps", o.reps},
                    {"warmup", o.warmup},
                    {"budget_ms", o.budget_ms},
                    {"blocks", o.scheduler.blocks},
                    {"threads_per_block", o.scheduler.threads_per_block},
                    {"push_policy", std::string(canopy::to_string(o.scheduler.policy))},
                    {"cpu_workers", o.cpu_workers}};
  nlohmann::json fields = nlohmann::json::object();
  for (const auto& f : entry_fields) fields[f[0]] = f[1];
  doc["fields"] = fields;
  nlohmann::json results = nlohmann::json::array();
  for (const bench_entry& e : report.entries) results.push_back(entry_json(e));
  doc["results"] = results;
  out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void write_csv(const bench_report& report, std::ostream& out) {
  for (std::size_t i = 0; i < std::size(entry_fields); ++i) out << (i ? "," : "") << entry_fields[i][0];
  out << "\n";
  for (const bench_entry& e : report.entries) {
    const nlohmann::json j = entry_json(e);
    for (std::size_t i = 0; i < std::size(entry_fields); ++i) out << (i ? "," : "") << csv_field(j.at(entry_fields[i][0]));
    out << "\n";
  }
}

}  // namespace canopy::bench
