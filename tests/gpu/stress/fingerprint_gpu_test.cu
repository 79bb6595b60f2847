// SPDX-License-Identifier: Apache-2.0
// The same runs in a release build and in a device-debug (-G) build of this file (two test
// binaries: gpu_stress_fingerprint_test and gpu_stress_fingerprint_debug_test): every mode, block
// sizes 64..1024, over a fixed set of graphs. Within a binary every run must be exact (each task
// once, after its dependencies, with the reference value) and give the same count fingerprint
// (a hash of every task's execution count and value); tools/gpu-check then compares the
// fingerprint line the two binaries print, which must be identical.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "canopy/gpu_scheduler.cuh"
#include "stress_common.cuh"

namespace {

using canopy::mode;
using canopy::task_id;

#ifdef CANOPY_DEVICE_DEBUG
constexpr const char* build_kind = "debug (-G)";
#else
constexpr const char* build_kind = "release";
#endif

std::vector<std::pair<std::string, canopy::task_graph>> fixed_graphs() {
  std::vector<std::pair<std::string, canopy::task_graph>> g;
  g.emplace_back("random tree 3000", canopy::task_graph::from_parents(canopy::testing::random_tree_parents(3000, 1)));
  g.emplace_back("narrow tree 2000", canopy::task_graph::from_parents(canopy::testing::random_tree_parents(2000, 2, 3)));
  std::vector<task_id> chain(400), star(2000, 0);
  for (int i = 0; i < 400; ++i) chain[i] = i + 1 < 400 ? i + 1 : canopy::no_task;
  star[0] = canopy::no_task;
  g.emplace_back("chain 400", canopy::task_graph::from_parents(chain));
  g.emplace_back("star 2000", canopy::task_graph::from_parents(star));
  g.emplace_back("dag 2000", canopy::task_graph::from_edges(2000, canopy::testing::random_dag_edges(2000, 4, 3)));
  return g;
}

// Block sizes to run: CANOPY_FINGERPRINT_BLOCK_SIZES (a comma list, e.g. "128,1024", so that the
// slow -G build can run a subset inside tools/gpu-check's time budget), else 64..1024. The
// fingerprint hashes one value per graph, which every exact configuration shares, so a subset
// prints the same fingerprint as the full set. An unreadable list fails the test.
std::vector<int> block_sizes() {
  const char* env = std::getenv("CANOPY_FINGERPRINT_BLOCK_SIZES");
  if (env == nullptr || *env == '\0') return {64, 128, 256, 512, 1024};
  std::vector<int> sizes;
  std::string item;
  for (const char* c = env;; ++c) {
    if (*c == ',' || *c == '\0') {
      char* end = nullptr;
      const long v = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || v < 32 || v > 1024 || v % 32 != 0) {
        ADD_FAILURE() << "CANOPY_FINGERPRINT_BLOCK_SIZES: '" << item << "' is not a multiple of 32 in 32..1024";
        return {};
      }
      sizes.push_back(static_cast<int>(v));
      item.clear();
      if (*c == '\0') break;
    } else {
      item += *c;
    }
  }
  return sizes;
}

std::uint64_t fnv(std::uint64_t h, std::uint64_t w) {
  for (int b = 0; b < 8; ++b) h = (h ^ ((w >> (8 * b)) & 0xff)) * 1099511628211ull;
  return h;
}

class Fingerprint : public canopy::test::gpu_test {};

TEST_F(Fingerprint, EveryModeAndBlockSizeGivesTheSameCounts) {
  std::uint64_t total = 1469598103934665603ull;
  int ran = 0, refused = 0;
  const std::vector<int> sizes = block_sizes();
  ASSERT_FALSE(sizes.empty());
  for (const auto& [name, g] : fixed_graphs()) {
    const auto expect = canopy::testing::reference_values(g);
    canopy::testing::mix_run run(g);
    std::uint64_t first = 0;
    bool have_first = false;
    for (mode m : canopy::all_modes) {
      for (int threads : sizes) {
        canopy::scheduler_options opt;
        opt.mode = m;
        opt.threads_per_block = threads;
        opt.deadline = std::chrono::seconds(60);  // -G kernels are slow
        canopy::gpu_scheduler sched(g, opt);
        const auto t0 = std::chrono::steady_clock::now();
        const auto r = sched.run(run.ops());
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        const std::string what = name + ", " + std::string(canopy::to_string(m)) + ", " + std::to_string(threads) + " threads";
        if (r.code == canopy::status::invalid_argument && sched.max_blocks<canopy::testing::mix_ops>(m) == 0) {
          ++refused;  // this build's kernel cannot run that many threads per block (registers): refused, typed
          std::printf("refused: %s: %s\n", what.c_str(), r.message.c_str());
          continue;
        }
        std::printf("%-48s %4d blocks %9.1f ms %s\n", what.c_str(), sched.last_grid(), ms, canopy::to_string(r.code).data());
        std::fflush(stdout);
        ASSERT_TRUE(r.ok()) << what << ": " << r.message;
        ASSERT_EQ(run.check(expect), "") << what;
        const std::uint64_t fp = run.fingerprint();
        if (!have_first) first = fp, have_first = true;
        EXPECT_EQ(fp, first) << what << ": a different count fingerprint";
        ++ran;
      }
    }
    ASSERT_TRUE(have_first) << name << ": no configuration ran";
    total = fnv(total, first);
  }
  std::printf("count fingerprint: %016llx\n", static_cast<unsigned long long>(total));
  std::printf("fingerprint runs (%s build): %d configurations exact, %d refused before launch\n", build_kind, ran, refused);
}

}  // namespace
