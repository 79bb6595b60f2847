// The GPU side of the benchmark: the scheduler's persistent kernel in every mode and the baselines
// of bench/baselines, on one uploaded copy of each tree. Compiled only under CANOPY_GPU.
//
// Every sample is one call as a user makes it: CUDA events around gpu_scheduler::run (a
// cooperative launch, then a stream synchronisation) or around a baseline's launches followed by
// a stream synchronisation, so both sides pay for launching and for waiting (bench/common's
// time_gpu records the stop event after the callable returns).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

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

summary to_summary(const timing& t) {
  return summary{t.median_us, t.min_us, t.max_us, t.samples_us.size()};
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
  std::optional<baseline_runner> baselines;
  // The passes, made on first use (upward_runner: node tasks with trees::upward_lanes lanes, as
  // `canopy validate --backend gpu` runs them; twig tasks over the twig graph).
  std::map<trees::pass_tasks, std::unique_ptr<trees::upward_runner>> passes;

  trees::upward_runner& pass(trees::pass_tasks kind) {
    auto p = passes.find(kind);
    if (p == passes.end()) {
      trees::upward_options o{trees::pass_backend::gpu, kind, options};
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
  summary time(int warmup, int reps) override {
    pass_.set_mode(mode_);
    return to_summary(time_gpu(
        [&](cudaStream_t s) {
          const canopy::run_result r = pass_.run(s);
          if (!r.ok()) throw std::runtime_error(std::string(canopy::to_string(r.code)) + " in a timed run: " + r.message);
        },
        timing_options{warmup, reps, nullptr}));
  }

 private:
  gpu_tree& t_;
  trees::upward_runner& pass_;
  canopy::mode mode_;
};

class baseline_pass_runner final : public pass_runner {
 public:
  baseline_pass_runner(gpu_tree& t, baseline_kind kind) : t_(t), kind_(kind) {}
  std::string detail() const override { return std::to_string(t_.baselines->group_size()) + " lanes per node"; }

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
  summary time(int warmup, int reps) override {
    return to_summary(time_gpu(
        [&](cudaStream_t s) {
          t_.baselines->run(kind_, s);
          CANOPY_CUDA_TRY(cudaGetLastError());
          CANOPY_CUDA_TRY(cudaStreamSynchronize(s));  // a user waits for the result, as run() does
        },
        timing_options{warmup, reps, nullptr}));
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
