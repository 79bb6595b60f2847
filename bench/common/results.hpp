// SPDX-License-Identifier: Apache-2.0
// Benchmark results: rows of (experiment, variant, size) with their timing, printed as an aligned
// terminal table and written as self-describing JSON (nlohmann_json, in results.cpp) and CSV.
// Host-only, no CUDA: usable from .cpp and .cu files alike.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace canopy::bench {

enum class row_status { ok, failed, skipped };
const char* to_string(row_status);

/// One measured (or failed, or skipped) variant at one size.
struct result_row {
  std::string experiment;         ///< e.g. "filter"
  std::string variant;            ///< e.g. "warp_aggregated"
  std::uint64_t size = 0;         ///< elements processed
  bool baseline = false;          ///< the naive variant the others' ratio_to_naive refers to
  row_status status = row_status::ok;
  double median_us = 0, min_us = 0, max_us = 0;
  int reps = 0;
  double bytes = 0;               ///< bytes moved per run (read + written), 0 if not meaningful
  std::string note;               ///< why it failed or was skipped, or a remark

  // Derived by result_table (from size, bytes, median and the table's copy bandwidth):
  double gelem_per_s = 0;         ///< size / median, in 1e9 elements per second
  double gb_per_s = 0;            ///< bytes / median, 1e9 bytes per second (0 if bytes == 0)
  double ratio_to_naive = 0;      ///< baseline median / this median (> 1: faster); 0 if none
  double fraction_of_copy = 0;    ///< gb_per_s / measured copy bandwidth; 0 if unknown
};

/// An event count from a validation run (e.g. global atomics issued by one variant).
struct count_row {
  std::string experiment, variant;
  std::uint64_t size = 0;
  std::string what;               ///< e.g. "global_atomics"
  std::uint64_t count = 0;
  std::uint64_t reference = 0;    ///< what it is compared with (e.g. the naive variant's count)
  std::string note;
};

class result_table {
 public:
  explicit result_table(std::string benchmark) : benchmark_(std::move(benchmark)) {}

  void add(result_row row);
  void add(count_row row);
  /// Context written into the JSON ("device", "copy_bandwidth_gb_per_s", ...).
  void set_metadata(const std::string& key, const std::string& value) { text_meta_[key] = value; }
  void set_metadata(const std::string& key, double value) { number_meta_[key] = value; }
  void set_copy_bandwidth(double gb_per_s) { copy_gb_per_s_ = gb_per_s; }

  /// Rows with the derived fields filled in.
  std::vector<result_row> rows() const;
  const std::vector<count_row>& counts() const { return counts_; }
  bool any_failed() const;

  void print(std::ostream&) const;
  void write_json(const std::filesystem::path&) const;  ///< throws std::runtime_error on I/O failure
  void write_csv(const std::filesystem::path&) const;   ///< throws std::runtime_error on I/O failure

 private:
  std::string benchmark_;
  std::vector<result_row> rows_;
  std::vector<count_row> counts_;
  std::map<std::string, std::string> text_meta_;
  std::map<std::string, double> number_meta_;
  double copy_gb_per_s_ = 0;
};

}  // namespace canopy::bench
