// SPDX-License-Identifier: Apache-2.0
#include "common/results.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "common/sizes.hpp"

namespace canopy::bench {

const char* to_string(row_status s) {
  switch (s) {
    case row_status::ok: return "ok";
    case row_status::failed: return "failed";
    case row_status::skipped: return "skipped";
  }
  return "unknown";
}

void result_table::add(result_row row) { rows_.push_back(std::move(row)); }
void result_table::add(count_row row) { counts_.push_back(std::move(row)); }

bool result_table::any_failed() const {
  return std::any_of(rows_.begin(), rows_.end(), [](const result_row& r) { return r.status == row_status::failed; });
}

std::vector<result_row> result_table::rows() const {
  std::vector<result_row> out = rows_;
  for (result_row& r : out) {
    if (r.status != row_status::ok || r.median_us <= 0) continue;
    const double seconds = r.median_us * 1e-6;
    r.gelem_per_s = static_cast<double>(r.size) / seconds / 1e9;
    r.gb_per_s = r.bytes > 0 ? r.bytes / seconds / 1e9 : 0;
    r.fraction_of_copy = (r.gb_per_s > 0 && copy_gb_per_s_ > 0) ? r.gb_per_s / copy_gb_per_s_ : 0;
    const auto base = std::find_if(rows_.begin(), rows_.end(), [&](const result_row& b) {
      return b.baseline && b.status == row_status::ok && b.experiment == r.experiment && b.size == r.size;
    });
    r.ratio_to_naive = base != rows_.end() && base->median_us > 0 ? base->median_us / r.median_us : 0;
  }
  return out;
}

namespace {

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

nlohmann::json number_or_null(double v) { return v > 0 && std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::ofstream open_for_write(const std::filesystem::path& path) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path);
  if (!out) throw std::runtime_error(path.string() + ": cannot open for writing");
  return out;
}

}  // namespace

void result_table::print(std::ostream& os) const {
  const std::vector<result_row> all = rows();
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"experiment", "variant", "size", "median us", "min us", "max us", "Gelem/s", "x naive", "GB/s",
                   "of copy", "status"});
  for (const result_row& r : all) {
    const bool ok = r.status == row_status::ok;
    cells.push_back({r.experiment, r.variant + (r.baseline ? " *" : ""), format_size(r.size),
                     ok ? fixed(r.median_us, 1) : "-", ok ? fixed(r.min_us, 1) : "-", ok ? fixed(r.max_us, 1) : "-",
                     ok ? fixed(r.gelem_per_s, 2) : "-", ok && r.ratio_to_naive > 0 ? fixed(r.ratio_to_naive, 2) : "-",
                     ok && r.gb_per_s > 0 ? fixed(r.gb_per_s, 0) : "-",
                     ok && r.fraction_of_copy > 0 ? fixed(100 * r.fraction_of_copy, 0) + "%" : "-",
                     std::string(to_string(r.status)) + (r.note.empty() ? "" : " (" + r.note + ")")});
  }
  std::vector<std::size_t> width(cells.front().size(), 0);
  for (const auto& line : cells)
    for (std::size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  for (std::size_t l = 0; l < cells.size(); ++l) {
    for (std::size_t c = 0; c < cells[l].size(); ++c) {
      const bool left = c < 2 || c + 1 == cells[l].size();
      os << (left ? std::left : std::right) << std::setw(static_cast<int>(width[c])) << cells[l][c]
         << (c + 1 == cells[l].size() ? "\n" : "  ");
    }
    if (l == 0) {
      std::size_t total = 0;
      for (std::size_t w : width) total += w + 2;
      os << std::string(total - 2, '-') << "\n";
    }
  }
  os << "(* = naive baseline of its experiment; x naive = baseline median / this median)\n";
  if (!counts_.empty()) {
    os << "\n";
    for (const count_row& c : counts_) {
      os << c.experiment << " / " << c.variant << " @ " << format_size(c.size) << ": " << c.what << " = " << c.count;
      if (c.reference > 0 && c.count > 0)
        os << "  (reference " << c.reference << ", " << fixed(static_cast<double>(c.reference) / static_cast<double>(c.count), 1)
           << "x fewer)";
      if (!c.note.empty()) os << "  " << c.note;
      os << "\n";
    }
  }
}

void result_table::write_json(const std::filesystem::path& path) const {
  nlohmann::json doc;
  doc["schema"] = "canopy-bench-results/1";
  doc["benchmark"] = benchmark_;
  doc["fields"] = {
      {"experiment", "what is computed"},
      {"variant", "how it is computed"},
      {"size", "elements processed per run"},
      {"baseline", "true for the naive variant that ratio_to_naive refers to"},
      {"status", "ok | failed (validation or CUDA error; no time counted) | skipped (see note)"},
      {"median_us", "median GPU time of one run in microseconds (CUDA events)"},
      {"min_us", "fastest run, microseconds"},
      {"max_us", "slowest run, microseconds"},
      {"reps", "timed runs after warm-up"},
      {"gelem_per_s", "size / median_us, 1e9 elements per second"},
      {"ratio_to_naive", "baseline median_us / median_us (> 1 is faster); null without a baseline"},
      {"bytes", "bytes read + written per run; null where not meaningful"},
      {"gb_per_s", "bytes / median, 1e9 bytes per second"},
      {"fraction_of_copy_bandwidth", "gb_per_s / metadata.copy_bandwidth_gb_per_s"},
  };
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [k, v] : text_meta_) meta[k] = v;
  for (const auto& [k, v] : number_meta_) meta[k] = v;
  if (copy_gb_per_s_ > 0) meta["copy_bandwidth_gb_per_s"] = copy_gb_per_s_;
  doc["metadata"] = meta;
  nlohmann::json results = nlohmann::json::array();
  for (const result_row& r : rows()) {
    const bool ok = r.status == row_status::ok;
    results.push_back({{"experiment", r.experiment},
                       {"variant", r.variant},
                       {"size", r.size},
                       {"baseline", r.baseline},
                       {"status", to_string(r.status)},
                       {"median_us", ok ? nlohmann::json(r.median_us) : nlohmann::json()},
                       {"min_us", ok ? nlohmann::json(r.min_us) : nlohmann::json()},
                       {"max_us", ok ? nlohmann::json(r.max_us) : nlohmann::json()},
                       {"reps", r.reps},
                       {"gelem_per_s", number_or_null(r.gelem_per_s)},
                       {"ratio_to_naive", number_or_null(r.ratio_to_naive)},
                       {"bytes", number_or_null(r.bytes)},
                       {"gb_per_s", number_or_null(r.gb_per_s)},
                       {"fraction_of_copy_bandwidth", number_or_null(r.fraction_of_copy)},
                       {"note", r.note}});
  }
  doc["results"] = results;
  nlohmann::json counts = nlohmann::json::array();
  for (const count_row& c : counts_)
    counts.push_back({{"experiment", c.experiment},
                      {"variant", c.variant},
                      {"size", c.size},
                      {"what", c.what},
                      {"count", c.count},
                      {"reference", c.reference},
                      {"note", c.note}});
  doc["counts"] = counts;
  std::ofstream out = open_for_write(path);
  out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  if (!out) throw std::runtime_error(path.string() + ": write failed");
}

void result_table::write_csv(const std::filesystem::path& path) const {
  std::ofstream out = open_for_write(path);
  out << "experiment,variant,size,baseline,status,median_us,min_us,max_us,reps,gelem_per_s,ratio_to_naive,bytes,"
         "gb_per_s,fraction_of_copy_bandwidth,note\n";
  out << std::setprecision(9);
  for (const result_row& r : rows()) {
    const bool ok = r.status == row_status::ok;
    auto num = [&](double v) { return ok && v > 0 ? fixed(v, 6) : std::string(); };
    out << csv_field(r.experiment) << ',' << csv_field(r.variant) << ',' << r.size << ',' << (r.baseline ? 1 : 0) << ','
        << to_string(r.status) << ',' << num(r.median_us) << ',' << num(r.min_us) << ',' << num(r.max_us) << ','
        << r.reps << ',' << num(r.gelem_per_s) << ',' << num(r.ratio_to_naive) << ','
        << (r.bytes > 0 ? fixed(r.bytes, 0) : std::string()) << ',' << num(r.gb_per_s) << ','
        << num(r.fraction_of_copy) << ',' << csv_field(r.note) << '\n';
  }
  if (!out) throw std::runtime_error(path.string() + ": write failed");
}

}  // namespace canopy::bench
