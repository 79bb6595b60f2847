// SPDX-License-Identifier: Apache-2.0
// The GPU side of the benchmark: the scheduler's persistent kernel in every mode and the baselines
// of bench/baselines, on one uploaded copy of each tree. Compiled only under CANOPY_GPU.
//
// Every timed run gives two clocks (time_both): the stream time, CUDA events around the enqueue
// with no host wait between them (the scheduler's run_async, a baseline's launches), and the
// end-to-end time, the host clock from the call until the host knows the result (the stream
// synchronised and, for the scheduler, its status read, as run() does). The host waits after
// each run, so each starts on an idle device, as a simulation step's pass would. The validation
// run (run_once) is the call a user makes first: run(), or the launches plus a wait.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <canopy/cuda/device.hpp>
#include <canopy/cuda/error.hpp>
#include <canopy/cuda/event.hpp>
#include <canopy/passes/device_octree.cuh>
#include <canopy/passes/upward_runner.hpp>

#include "baselines/baselines.cuh"
#include "common/gpu_timing.cuh"
#include "octree_bench.hpp"

namespace canopy::bench {

namespace {

// The mutex mode allocates a list node per push from the device heap, which can only grow before
// the first kernel that calls malloc. Reserve room for every leaf of a depth-8 tree at once.
constexpr std::size_t mutex_heap_bytes = std::size_t{1} << 30;

// Times one enqueue-and-wait call with a pair of events (as time_gpu does for each sample).
template <class Work>
double event_time_us(Work&& work) {
  canopy::cuda_event start, stop;
  start.record();
  work();
  stop.record();
  return 1000.0 * static_cast<double>(canopy::elapsed_ms(start, stop));
}

using host_clock = std::chrono::steady_clock;

// The stream every timed run goes to: a user's own, non-blocking (the legacy default stream
// synchronises with every other blocking stream).
class bench_stream {
 public:
  bench_stream() { CANOPY_CUDA_TRY(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~bench_stream() { (void)cudaStreamDestroy(s_); }
  bench_stream(const bench_stream&) = delete;
  bench_stream& operator=(const bench_stream&) = delete;
  cudaStream_t get() const noexcept { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// `warmup` untimed, then `reps` timed pairs of runs of `enqueue(stream)`, each followed by
// `finish(stream)`, which waits for the result and throws if it failed: the first run of a pair
// between two events (stream time), the second on the host clock alone (end to end: the event
// records would add their own host calls, about 2 µs, to it).
template <class Enqueue, class Finish>
timed_runs time_both(Enqueue&& enqueue, Finish&& finish, int warmup, int reps, cudaStream_t stream) {
  if (reps < 1) throw std::invalid_argument("time_both: reps must be at least 1");
  canopy::cuda_event start, stop;
  std::vector<double> t1, t2;
  for (int i = 0; i < warmup + reps; ++i) {
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));  // idle device, nothing of the last run left
    start.record(stream);
    enqueue(stream);
    stop.record(stream);
    finish(stream);
    const auto t0 = host_clock::now();
    enqueue(stream);
    finish(stream);
    const double e2e_us = std::chrono::duration<double, std::micro>(host_clock::now() - t0).count();
    if (i < warmup) continue;
    t1.push_back(1000.0 * static_cast<double>(canopy::elapsed_ms(start, stop)));
    t2.push_back(e2e_us);
  }
  return timed_runs{summarize(t1), summarize(t2)};
}

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

class gpu_platform;

// State of the loaded tree, shared by the runners made for it: one device copy of the tree and
// one set of payloads, which the scheduler's passes (one per task kind) and the baselines all
// write, so every variant is checked the same way.
struct gpu_tree {
  const trees::octree* host = nullptr;
  trees::device_octree tree;
  trees::device_payloads<float> payloads;
  canopy::scheduler_options options;
  int bucket_points = 0;  // bench_options::bucket_points
  std::optional<baseline_runner> baselines;
  bench_stream stream;  // the timed runs' stream
  // The passes, made on first use (upward_runner: node tasks with trees::upward_lanes lanes, as
  // `canopy validate --backend gpu` runs them; twig tasks over the twig graph).
  std::map<trees::pass_tasks, std::unique_ptr<trees::upward_runner>> passes;

  trees::upward_runner& pass(trees::pass_tasks kind) {
    auto p = passes.find(kind);
    if (p == passes.end()) {
      trees::upward_options o{trees::pass_backend::gpu, kind, options};
      o.bucket_points = bucket_points;
      // Bucket tasks stage a bucket in shared memory for at most 4 warps a block.
      if (kind == trees::pass_tasks::bucket) o.scheduler.threads_per_block = std::min(o.scheduler.threads_per_block, 128);
      // Twig tasks run on groups of 8-32 lanes: 256-thread blocks moved 8% more bytes per second
      // than 128 at depth 8 (bench/RESULTS.md), and were as fast at depth 5.
      if (kind == trees::pass_tasks::twig) o.scheduler.threads_per_block = std::max(o.scheduler.threads_per_block, 256);
      p = passes.emplace(kind, std::make_unique<trees::upward_runner>(*host, tree, payloads, o)).first;
    }
    return *p->second;
  }
  // All bytes 0xff: NaN in every float and a count no node has, so a node a run skips cannot pass.
  void poison() {
    payloads.fill_bytes(0xff);
    CANOPY_CUDA_TRY(cudaDeviceSynchronize());
  }
  trees::comparison check(std::span<const trees::multipole<double>> reference, bool perturb) const {
    auto computed = payloads.download();
    if (perturb && !computed.empty()) computed.front().mass *= 1.01f;
    return trees::compare_payloads<float>(*host, computed, reference);
  }
};

// One scheduler mode on one of the tree's passes.
class scheduler_runner final : public pass_runner {
 public:
  scheduler_runner(gpu_tree& t, trees::upward_runner& pass, canopy::mode m) : t_(t), pass_(pass), mode_(m) {}

  run_outcome run_once() override {
    t_.poison();
    pass_.set_mode(mode_);
    canopy::run_result r;
    const double us = event_time_us([&] { r = pass_.run(); });
    return run_outcome{r.code, r.message, us};
  }
  std::string detail() const override {
    return std::to_string(pass_.grid()) + " blocks x " + std::to_string(pass_.options().threads_per_block) +
           " threads, " + std::to_string(pass_.lanes()) + " lanes per task";
  }
  trees::comparison check(const trees::octree&, std::span<const trees::multipole<double>> reference,
                          bool perturb) override {
    return t_.check(reference, perturb);
  }
  timed_runs time(int warmup, int reps) override {
    pass_.set_mode(mode_);
    return time_both([&](cudaStream_t s) { pass_.run_async(s); },
                     [&](cudaStream_t s) {
                       CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
                       const canopy::run_result r = pass_.last_result();
                       if (!r.ok())
                         throw std::runtime_error(std::string(canopy::to_string(r.code)) + " in a timed run: " + r.message);
                     },
                     warmup, reps, t_.stream.get());
  }

 private:
  gpu_tree& t_;
  trees::upward_runner& pass_;
  canopy::mode mode_;
};

class baseline_pass_runner final : public pass_runner {
 public:
  baseline_pass_runner(gpu_tree& t, baseline_kind kind) : t_(t), kind_(kind) {}
  std::string detail() const override {
    const baseline_options& o = t_.baselines->options();
    if (kind_ == baseline_kind::last_arriver) return std::to_string(o.group_size) + " lanes per node";
    if (o.layout == level_layout::per_level)
      return "one launch per level (tuned: the faster layout here), " + std::to_string(o.group_size) + " lanes per node";
    return "leaves first, then one launch per level (tuned: the faster layout here), " + std::to_string(o.group_size) +
           " lanes per leaf, " + std::to_string(o.merge_group_size) + " per internal node";
  }

  run_outcome run_once() override {
    t_.poison();
    const double us = event_time_us([&] {
      t_.baselines->run(kind_, nullptr);
      CANOPY_CUDA_TRY(cudaGetLastError());
      CANOPY_CUDA_TRY(cudaStreamSynchronize(nullptr));
    });
    return run_outcome{canopy::status::ok, {}, us};
  }
  trees::comparison check(const trees::octree&, std::span<const trees::multipole<double>> reference,
                          bool perturb) override {
    return t_.check(reference, perturb);
  }
  timed_runs time(int warmup, int reps) override {
    return time_both(
        [&](cudaStream_t s) {
          t_.baselines->run(kind_, s);
          CANOPY_CUDA_TRY(cudaGetLastError());
        },
        [&](cudaStream_t s) { CANOPY_CUDA_TRY(cudaStreamSynchronize(s)); },  // a user waits for the result
        warmup, reps, t_.stream.get());
  }

 private:
  gpu_tree& t_;
  baseline_kind kind_;
};

class gpu_platform final : public platform {
 public:
  gpu_platform() {
    std::size_t heap = 0;
    CANOPY_CUDA_TRY(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize));
    if (heap < mutex_heap_bytes && cudaDeviceSetLimit(cudaLimitMallocHeapSize, mutex_heap_bytes) != cudaSuccess)
      (void)cudaGetLastError();  // the scheduler sizes the heap itself where it still can
  }

  std::vector<std::string> backends() const override { return {std::string(backend_gpu)}; }

  std::vector<platform_facts> facts(const bench_options&) override {
    if (!facts_) {
      const device_facts d = query_device();
      int driver = 0, runtime = 0;
      CANOPY_CUDA_TRY(cudaDriverGetVersion(&driver));
      CANOPY_CUDA_TRY(cudaRuntimeGetVersion(&runtime));
      platform_facts f;
      f.backend = backend_gpu;
      f.device = d.name;
      f.sm_count = d.sm_count;
      f.driver = "CUDA driver " + version_text(driver) + ", runtime " + version_text(runtime) + ", sm_" +
                 std::to_string(d.compute_major) + std::to_string(d.compute_minor);
      f.copy_gb_per_s = measure_copy_bandwidth();
      f.copy_method = "cudaMemcpy device to device of up to 1 GiB, read + written bytes, median of 10";
      facts_ = f;
    }
    return {*facts_};
  }

  void load(const trees::octree& tree, const bench_options& options) override {
    unload();
    auto t = std::make_unique<gpu_tree>();
    t->host = &tree;
    t->tree = trees::device_octree(tree);
    t->payloads = trees::device_payloads<float>(t->tree.node_count());
    t->options = options.scheduler;
    t->bucket_points = options.bucket_points;
    t->options.deadline = std::chrono::milliseconds(static_cast<long long>(std::max(1.0, std::ceil(options.budget_ms))));
    t->pass(trees::pass_tasks::node);
    tree_ = std::move(t);
  }

  void unload() override { tree_.reset(); }

  std::unique_ptr<pass_runner> runner(const variant& v) override {
    if (!tree_) throw std::logic_error("gpu platform: no tree loaded");
    if (v.backend != backend_gpu) throw std::invalid_argument("gpu platform: cannot run backend " + v.backend);
    if (v.mode) {
      trees::upward_runner& pass = tree_->pass(v.tasks);
      return std::make_unique<scheduler_runner>(*tree_, pass, *v.mode);
    }
    const baseline_kind kind = parse_baseline_kind(v.name);  // throws std::invalid_argument
    // Captured once per tree, on first use (the level graph bakes in the pointers).
    if (!tree_->baselines) tree_->baselines.emplace(tree_->tree, tree_->payloads);
    return std::make_unique<baseline_pass_runner>(*tree_, kind);
  }

  bool healthy() override {
    // A sticky error (illegal address, trap) makes every later call fail: stop the benchmark.
    (void)cudaGetLastError();
    return cudaDeviceSynchronize() == cudaSuccess;
  }

 private:
  std::optional<platform_facts> facts_;
  std::unique_ptr<gpu_tree> tree_;
};

}  // namespace

bool gpu_device_present() { return canopy::gpu_available(); }

std::unique_ptr<platform> make_gpu_platform() {
  if (!canopy::gpu_available()) return nullptr;
  return std::make_unique<gpu_platform>();
}

}  // namespace canopy::bench
