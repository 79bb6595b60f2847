// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the trees tests.
#pragma once

#include <canopy/trees/errors.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/point.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

namespace canopy::trees::testing {

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class temp_dir {
 public:
  temp_dir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "canopy_trees_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    if (info != nullptr) name += std::string("_") + info->name();
    std::replace(name.begin(), name.end(), '/', '_');
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& leaf) const { return path_ / leaf; }
  // Names of the files in the directory (to see that no temporary was left behind).
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

inline bool same_bits(const point& a, const point& b) { return std::memcmp(&a, &b, sizeof(point)) == 0; }

inline bool same_bits(const std::vector<point>& a, const std::vector<point>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(point)) == 0);
}

// The points as a sorted multiset, to check that a tree holds a permutation of its input.
inline std::vector<std::tuple<float, float, float, float>> sorted_tuples(const std::vector<point>& pts) {
  std::vector<std::tuple<float, float, float, float>> v;
  v.reserve(pts.size());
  for (const point& p : pts) v.emplace_back(p.x, p.y, p.z, p.m);
  std::sort(v.begin(), v.end());
  return v;
}

// Asserts that the message of `fn`'s exception (type E) contains every fragment.
template <class E, class Fn>
E expect_throw(Fn&& fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
  } catch (const E& e) {
    const std::string what = e.what();
    for (const std::string& f : fragments) EXPECT_NE(what.find(f), std::string::npos) << "'" << f << "' not in: " << what;
    return e;
  }
  ADD_FAILURE() << "expected an exception";
  throw std::logic_error("no exception");
}

}  // namespace canopy::trees::testing
