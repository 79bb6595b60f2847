// SPDX-License-Identifier: Apache-2.0
// The benchmark harness's host-side pieces: stats, size lists, and the result writers (the JSON
// read back and checked field by field, since plot scripts depend on it).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/results.hpp"
#include "common/sizes.hpp"
#include "common/stats.hpp"

namespace {

using namespace canopy::bench;

TEST(bench_stats, median_min_max) {
  const summary odd = summarize({5, 1, 3});
  EXPECT_EQ(odd.median, 3);
  EXPECT_EQ(odd.min, 1);
  EXPECT_EQ(odd.max, 5);
  EXPECT_EQ(odd.count, 3u);
  EXPECT_EQ(summarize({4, 1, 3, 2}).median, 2.5);
  EXPECT_EQ(summarize({7}).median, 7);
  EXPECT_THROW(summarize({}), std::invalid_argument);
}

TEST(bench_sizes, parses_binary_suffixes_and_plain_numbers) {
  EXPECT_EQ(parse_size_list("1M,16M,256M"), (std::vector<std::uint64_t>{1u << 20, 1u << 24, 1u << 28}));
  EXPECT_EQ(parse_size_list("1000003, 2k ,1G"), (std::vector<std::uint64_t>{1000003, 2048, 1u << 30}));
  for (const char* bad : {"", "1M,", "x", "0", "1T", "M", "99999999999999999999", "1,-2"})
    EXPECT_THROW(parse_size_list(bad), std::invalid_argument) << bad;
  EXPECT_EQ(format_size(1u << 24), "16M");
  EXPECT_EQ(format_size(1000003), "1000003");
  EXPECT_EQ(format_size(3u << 10), "3K");
}

result_table sample_table() {
  result_table t("unit");
  t.set_copy_bandwidth(2000);
  t.set_metadata("device", "test device");
  result_row naive;
  naive.experiment = "filter";
  naive.variant = "global_atomic";
  naive.size = 1000;
  naive.baseline = true;
  naive.median_us = 10;
  naive.min_us = 9;
  naive.max_us = 12;
  naive.reps = 20;
  naive.bytes = 8000;
  t.add(naive);
  result_row fast = naive;
  fast.variant = "warp, aggregated \"quoted\"";
  fast.baseline = false;
  fast.median_us = 2.5;
  t.add(fast);
  result_row failed = naive;
  failed.variant = "broken";
  failed.baseline = false;
  failed.status = row_status::failed;
  failed.note = "counted 3, expected 4";
  t.add(failed);
  t.add(count_row{"filter", "warp", 1000, "global_atomics", 40, 500, "lower bound 32"});
  return t;
}

TEST(bench_results, derived_fields) {
  const result_table t = sample_table();
  const auto rows = t.rows();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_DOUBLE_EQ(rows[0].ratio_to_naive, 1.0);
  EXPECT_DOUBLE_EQ(rows[1].ratio_to_naive, 4.0);
  EXPECT_DOUBLE_EQ(rows[1].gelem_per_s, 1000 / 2.5e-6 / 1e9);
  EXPECT_DOUBLE_EQ(rows[1].gb_per_s, 8000 / 2.5e-6 / 1e9);
  EXPECT_DOUBLE_EQ(rows[1].fraction_of_copy, rows[1].gb_per_s / 2000);
  EXPECT_EQ(rows[2].ratio_to_naive, 0);
  EXPECT_TRUE(t.any_failed());
  std::ostringstream text;
  t.print(text);
  EXPECT_NE(text.str().find("global_atomic *"), std::string::npos);
  EXPECT_NE(text.str().find("failed (counted 3, expected 4)"), std::string::npos);
  EXPECT_NE(text.str().find("12.5x fewer"), std::string::npos);
}

TEST(bench_results, json_is_self_describing) {
  const auto path = std::filesystem::temp_directory_path() / "canopy_bench_common_test" / "r.json";
  sample_table().write_json(path);
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["benchmark"], "unit");
  EXPECT_EQ(doc["metadata"]["device"], "test device");
  EXPECT_EQ(doc["metadata"]["copy_bandwidth_gb_per_s"], 2000.0);
  ASSERT_EQ(doc["results"].size(), 3u);
  for (const char* field : {"experiment", "variant", "size", "median_us", "min_us", "max_us", "gelem_per_s",
                            "ratio_to_naive", "status"}) {
    EXPECT_TRUE(doc["results"][0].contains(field)) << field;
    EXPECT_TRUE(doc["fields"].contains(field)) << field;
  }
  EXPECT_EQ(doc["results"][1]["ratio_to_naive"], 4.0);
  EXPECT_EQ(doc["results"][1]["median_us"], 2.5);
  EXPECT_TRUE(doc["results"][2]["median_us"].is_null());
  EXPECT_EQ(doc["results"][2]["status"], "failed");
  EXPECT_EQ(doc["counts"][0]["count"], 40);
  std::filesystem::remove_all(path.parent_path());
}

TEST(bench_results, csv_quotes_and_columns) {
  const auto path = std::filesystem::temp_directory_path() / "canopy_bench_common_test.csv";
  sample_table().write_csv(path);
  std::ifstream in(path);
  std::string header, first, second;
  std::getline(in, header);
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_EQ(header.rfind("experiment,variant,size,baseline,status,median_us", 0), 0u);
  EXPECT_EQ(first.rfind("filter,global_atomic,1000,1,ok,10.000000,9.000000,12.000000,20,", 0), 0u);
  EXPECT_NE(second.find("\"warp, aggregated \"\"quoted\"\"\""), std::string::npos);
  std::filesystem::remove(path);
}

TEST(bench_results, unwritable_path_throws) {
  EXPECT_THROW(sample_table().write_csv("/proc/definitely/not/writable.csv"), std::exception);
}

}  // namespace
