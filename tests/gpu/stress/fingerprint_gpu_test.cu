// SPDX-License-Identifier: Apache-2.0
// The same runs in a release build and in a device-debug (-G) build of this file (two test
// binaries: gpu_stress_fingerprint_test and gpu_stress_fingerprint_debug_test): every mode, block
// sizes 64..1024, over a fixed set of graphs. Within a binary every run must be exact (each task
// once, after its dependencies, with the reference value) and give the same count fingerprint
// (a hash of every task's execution count and value). That hash cannot differ between builds
// (it covers values already checked equal to the reference), so the binaries also hash what is
// not checked bit for bit: the octree upward pass's payloads (PayloadBitsOfEveryModeAndBlockSize).
// tools/gpu-check compares the count and payload fingerprint lines the two binaries print, which
// must be identical.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "canopy/gpu_scheduler.cuh"
#if defined(CANOPY_FINGERPRINT_PAYLOADS)
#include "canopy/cuda/device_buffer.hpp"
#include "canopy/passes/device_octree.cuh"
#include "canopy/passes/twig_pass.hpp"
#include "canopy/passes/upward_pass.hpp"
#include "canopy/trees/generators.hpp"
#include "canopy/trees/octree.hpp"
#include "canopy/trees/reference.hpp"
#endif
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

#if defined(CANOPY_FINGERPRINT_PAYLOADS)
// The octree upward pass's actual output, compared between the builds: the payload bits of every
// node, for node tasks and twig tasks, every mode and block size, on two trees. These are not
// checked bit for bit against anything inside a build (only within compare_payloads' bounds of the
// double reference), so a difference between the release and the -G build (a race the optimiser
// exposes, an uninitialised register, a lane that publishes early) shows here even when both are
// inside the bounds. Both binaries are compiled with --fmad=false (CMakeLists.txt): the payload
// arithmetic is then plain IEEE adds, multiplies and divides in both, and a task merges its
// children in a fixed order whatever the schedule, so equal inputs give equal bits.
namespace ct = canopy::trees;

// fnv (above) over every 32-bit word of the payloads.
std::uint64_t payload_hash(const std::vector<ct::multipole<float>>& out) {
  static_assert(sizeof(ct::multipole<float>) % sizeof(std::uint32_t) == 0);
  std::vector<std::uint32_t> words(out.size() * sizeof(ct::multipole<float>) / sizeof(std::uint32_t));
  std::memcpy(words.data(), out.data(), words.size() * sizeof(std::uint32_t));
  std::uint64_t h = 1469598103934665603ull;
  for (const std::uint32_t w : words) h = fnv(h, w);
  return h;
}

TEST_F(Fingerprint, PayloadBitsOfEveryModeAndBlockSize) {
  const std::vector<int> sizes = block_sizes();
  ASSERT_FALSE(sizes.empty());
  std::vector<std::pair<std::string, ct::octree>> trees;
  trees.emplace_back("lattice 3x8", ct::build_octree(ct::generate_lattice(3, 8, 7), {.max_leaf = 8, .max_depth = 21}));
  trees.emplace_back("plummer 20000", ct::build_octree(ct::generate_plummer(20000, 11), {.max_leaf = 16, .max_depth = 21}));
  std::uint64_t total = 1469598103934665603ull;
  int ran = 0;
  for (const auto& [tree_name, tree] : trees) {
    const auto ref = ct::reference_upward_pass(tree);
    ct::device_octree dtree(tree);
    ct::device_payloads<float> payloads(tree.node_count());
    const auto t = dtree.ref();
    const ct::twig_graph tg = ct::make_twig_graph(tree);
    canopy::device_buffer<ct::twig_task> twig_tasks(tg.tasks);
    const ct::upward_arrays<float> arrays{t.points, t.first_child, t.child_count, t.point_begin, t.point_count, payloads.data()};
    const auto node_graph = ct::make_upward_graph(tree);
    for (const std::string kind : {"node", "twig"}) {
      for (mode m : canopy::all_modes) {
        std::uint64_t first = 0;
        bool have = false;
        for (int threads : sizes) {
          canopy::scheduler_options opt;
          opt.mode = m;
          opt.threads_per_block = threads;
          opt.deadline = std::chrono::seconds(60);
          const std::string what = tree_name + ", " + kind + " tasks, " + std::string(canopy::to_string(m)) + ", " +
                                   std::to_string(threads) + " threads";
          std::vector<ct::multipole<float>> poison(static_cast<std::size_t>(tree.node_count()));
          for (auto& p : poison) p.count = 0xdeadbeef;
          payloads.upload(poison);
          canopy::run_result r;
          int max_blocks = 1;
          if (kind == "node") {
            const ct::upward_ops<float, 2> ops{arrays};
            canopy::gpu_scheduler sched(node_graph, opt);
            max_blocks = sched.max_blocks<decltype(ops)>(m);
            r = sched.run(ops);
          } else {
            const ct::twig_upward_ops<float, 2> ops{twig_tasks.data(), arrays};
            canopy::gpu_scheduler sched(tg.graph, opt);
            max_blocks = sched.max_blocks<decltype(ops)>(m);
            r = sched.run(ops);
          }
          if (r.code == canopy::status::invalid_argument && max_blocks == 0) continue;  // refused before launch, as above
          ASSERT_TRUE(r.ok()) << what << ": " << r.message;
          const auto out = payloads.download();
          const auto cmp = ct::compare_payloads<float>(tree, out, ref);
          ASSERT_TRUE(cmp.within_tolerance) << what << ": " << cmp.summary();
          const std::uint64_t h = payload_hash(out);
          if (!have) first = h, have = true;
          // The merge order is fixed per task, so the schedule (block size) cannot change the bits.
          EXPECT_EQ(h, first) << what << ": payload bits differ from the first block size's";
          ++ran;
        }
        ASSERT_TRUE(have) << tree_name << ", " << kind << " tasks, " << canopy::to_string(m) << ": no block size ran";
        std::printf("payloads %-14s %-5s %-14s %016llx\n", tree_name.c_str(), kind.c_str(), std::string(canopy::to_string(m)).c_str(),
                    static_cast<unsigned long long>(first));
        total = fnv(total, first);
      }
    }
  }
  std::printf("payload fingerprint: %016llx\n", static_cast<unsigned long long>(total));
  std::printf("payload runs (%s build): %d configurations within the reference's bounds\n", build_kind, ran);
}
#endif

}  // namespace
