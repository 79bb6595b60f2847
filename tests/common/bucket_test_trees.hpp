// SPDX-License-Identifier: Apache-2.0
// The trees both bucket-task suites run (tests/cpu/trees/bucket_pass_test.cpp on the host's
// decomposition and the CPU backend, tests/gpu/trees/bucket_gpu_test.cpp on the warp's code):
// empty, one point, complete trees, adaptive trees with leaves of 1 to 32 points, clusters, and a
// depth-capped tree whose leaves are far larger than a bucket (big leaves).
#pragma once

#include <canopy/trees/generators.hpp>
#include <canopy/trees/octree.hpp>

#include <string>
#include <utility>
#include <vector>

namespace canopy::test {

inline std::vector<std::pair<std::string, canopy::trees::octree>> bucket_test_trees() {
  namespace ct = canopy::trees;
  std::vector<std::pair<std::string, ct::octree>> t;
  t.emplace_back("empty", ct::build_octree({}));
  t.emplace_back("one point", ct::build_octree(ct::generate_uniform(1, 1)));
  t.emplace_back("complete 3x8", ct::build_complete_octree(3, 8, 1));
  t.emplace_back("complete 2x33", ct::build_complete_octree(2, 33, 2));
  t.emplace_back("plummer 30k leaf 32", ct::build_octree(ct::generate_plummer(30000, 3), {32, 21}));
  t.emplace_back("plummer 5k leaf 1", ct::build_octree(ct::generate_plummer(5000, 4), {1, 21}));
  t.emplace_back("clusters 20k leaf 8", ct::build_octree(ct::generate_clusters(20000, 5, 5), {8, 21}));
  t.emplace_back("uniform 6k depth 2", ct::build_octree(ct::generate_uniform(6000, 6), {4, 2}));  // big leaves
  return t;
}

}  // namespace canopy::test
