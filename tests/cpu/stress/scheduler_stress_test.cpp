// Seeded randomised stress of the CPU backend: for each seed a random graph shape (random
// recursive tree, chain, star, complete k-ary tree, forest, random DAG through from_edges), a
// random worker count (2..8), random queue capacities (1..3 for the private, shared and global
// queues), a random push policy, and every mode in turn. Each run must
//   * run every task exactly once (executions are counted),
//   * run a task only after all of its dependencies (checked inside the task),
//   * finish before its deadline (a timeout is a livelock; a watchdog aborts a hung run),
//   * give the values of a serial topological evaluation,
// or, with a global queue too small for the graph, end in status::queue_overflow having run no
// task twice and none early; the same scheduler must then run again cleanly with no leftovers.
//
// CANOPY_STRESS_SEEDS sets the number of seeds (default 10000; 3000 under ThreadSanitizer and
// under ASan, set at build time); CANOPY_STRESS_FIRST_SEED the first one (to replay a failure: the failure message
// names its seed).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "canopy/cpu_scheduler.hpp"
#include "stress_graphs.hpp"

#ifndef CANOPY_STRESS_DEFAULT_SEEDS
#define CANOPY_STRESS_DEFAULT_SEEDS 10000
#endif

namespace {

using canopy::task_id;

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 10);
}

// value[t] = mix of t and its predecessors' values (wrapping unsigned arithmetic: no overflow UB).
struct checked_ops {
  const canopy::task_graph* graph;
  std::uint64_t* value;
  std::atomic<int>* runs;
  std::atomic<int>* early;  // tasks that ran before one of their dependencies had finished
  void operator()(task_id t) const {
    std::uint64_t v = canopy::testing::seed_value(t);
    for (std::int32_t j = graph->pred_offsets()[t]; j < graph->pred_offsets()[t + 1]; ++j) {
      const task_id p = graph->predecessors()[j];
      if (runs[p].load(std::memory_order_relaxed) != 1) early->fetch_add(1, std::memory_order_relaxed);
      v = canopy::testing::mix_value(v, value[p]);  // a plain read: TSan checks the scheduler's ordering
    }
    value[t] = v;
    runs[t].fetch_add(1, std::memory_order_relaxed);
  }
};

// --- watchdog: a run that neither finishes nor times out is a hang; abort with the seed --------

class watchdog {
 public:
  explicit watchdog(std::chrono::seconds limit) : limit_(limit), thread_([this] { loop(); }) {}
  ~watchdog() {
    stop_.store(true);
    thread_.join();
  }
  void arm(std::string what) {
    {
      std::lock_guard lock(mutex_);
      what_ = std::move(what);
    }
    since_.store(std::chrono::steady_clock::now().time_since_epoch().count());
  }

 private:
  void loop() {
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const auto since = std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(since_.load()));
      if (since_.load() != 0 && std::chrono::steady_clock::now() - since > limit_) {
        std::lock_guard lock(mutex_);
        std::fprintf(stderr, "watchdog: a run is still going after %lld s (past its deadline): %s\n",
                     static_cast<long long>(limit_.count()), what_.c_str());
        std::abort();
      }
    }
  }
  std::chrono::seconds limit_;
  std::atomic<bool> stop_{false};
  std::atomic<std::chrono::steady_clock::rep> since_{0};
  std::mutex mutex_;
  std::string what_;
  std::thread thread_;
};

struct run_check {
  canopy::run_result result;
  int missing = 0, repeated = 0, early = 0, wrong = 0;
  task_id first_bad = canopy::no_task;
};

run_check run_once(canopy::cpu_scheduler& sched, const canopy::task_graph& g, const std::vector<std::uint64_t>& expect) {
  const auto n = static_cast<std::size_t>(g.task_count());
  std::vector<std::uint64_t> value(n, 0);
  std::vector<std::atomic<int>> runs(n);
  std::atomic<int> early{0};
  run_check c;
  c.result = sched.run(checked_ops{&g, value.data(), runs.data(), &early});
  c.early = early.load();
  for (std::size_t t = 0; t < n; ++t) {
    const int k = runs[t].load();
    if (k > 1) ++c.repeated;
    if (k == 0) ++c.missing;
    if (k == 1 && value[t] != expect[t]) ++c.wrong;
    if ((k != 1 || value[t] != expect[t]) && c.first_bad == canopy::no_task) c.first_bad = static_cast<task_id>(t);
  }
  return c;
}

TEST(SchedulerStress, RandomShapesWorkersCapacitiesAndModes) {
  const std::uint64_t first = env_or("CANOPY_STRESS_FIRST_SEED", 1);
  const std::uint64_t seeds = env_or("CANOPY_STRESS_SEEDS", CANOPY_STRESS_DEFAULT_SEEDS);
  watchdog dog(std::chrono::seconds(120));
  std::uint64_t runs = 0, overflows = 0, tasks = 0;
  int failures = 0;
  for (std::uint64_t seed = first; seed < first + seeds && failures < 5; ++seed) {
    std::mt19937_64 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const canopy::testing::shape s = canopy::testing::random_shape(rng);
    const canopy::task_graph& g = s.graph;
    const auto expect = canopy::testing::reference_values(g);

    canopy::scheduler_options opt;
    opt.mode = canopy::all_modes[seed % canopy::all_modes.size()];
    opt.policy = canopy::all_push_policies[static_cast<std::size_t>(pick(0, 2))];
    opt.blocks = pick(2, 8);
    opt.private_queue_capacity = pick(1, 3);
    opt.shared_queue_capacity = pick(1, 3);
    // One seed in four also shrinks the global queue: the run may then overflow, but only with
    // the typed status, and never by losing or repeating a task.
    const bool tiny_global = pick(0, 3) == 0;
    opt.global_queue_capacity = tiny_global ? pick(1, 3) : 0;
    opt.deadline = std::chrono::seconds(30);

    std::ostringstream what;
    what << "seed " << seed << ": " << s.name << ", mode " << canopy::to_string(opt.mode) << ", policy "
         << canopy::to_string(opt.policy) << ", workers " << opt.blocks << ", capacities private "
         << opt.private_queue_capacity << " shared " << opt.shared_queue_capacity << " global "
         << opt.global_queue_capacity;
    canopy::cpu_scheduler sched(g, opt);
    for (int rep = 0; rep < 2; ++rep) {  // the second run on the same scheduler starts clean
      dog.arm(what.str() + ", run " + std::to_string(rep));
      const run_check c = run_once(sched, g, expect);
      ++runs;
      tasks += static_cast<std::uint64_t>(g.task_count());
      const bool overflow_ok = tiny_global && c.result.code == canopy::status::queue_overflow &&
                               c.result.task != canopy::no_task && c.repeated == 0 && c.early == 0 && c.wrong == 0;
      if (overflow_ok) {
        ++overflows;
        continue;
      }
      const bool ok = c.result.ok() && c.missing == 0 && c.repeated == 0 && c.early == 0 && c.wrong == 0;
      if (!ok) {
        ++failures;
        ADD_FAILURE() << what.str() << ", run " << rep << ": status " << canopy::to_string(c.result.code) << " ("
                      << c.result.message << "), " << c.missing << " tasks never ran, " << c.repeated
                      << " ran more than once, " << c.early << " dependency reads before the dependency finished, "
                      << c.wrong << " wrong values; first bad task " << c.first_bad
                      << "\n  replay: CANOPY_STRESS_FIRST_SEED=" << seed << " CANOPY_STRESS_SEEDS=1";
      }
    }
  }
  std::printf("stress: %llu seeds from %llu, %llu runs, %llu tasks, %llu typed queue overflows (tiny global queue)\n",
              static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(first),
              static_cast<unsigned long long>(runs), static_cast<unsigned long long>(tasks),
              static_cast<unsigned long long>(overflows));
  EXPECT_GT(runs, overflows) << "every run overflowed: the stress checked nothing";
}

}  // namespace
