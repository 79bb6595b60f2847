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
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <canopy/gpu_scheduler.cuh>
#include <canopy/trees/device_octree.cuh>
#include <canopy/trees/twig_pass.hpp>
#include <canopy/trees/upward_pass.hpp>

#include "baselines/baselines.cuh"
#include "common/cuda_check.hpp"
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
  cudaEvent_t start = nullptr, stop = nullptr;
  CANOPY_CUDA_CHECK(cudaEventCreate(&start));
  if (const cudaError_t e = cudaEventCreate(&stop); e != cudaSuccess) {
    (void)cudaEventDestroy(start);
    throw_cuda_error(e, "cudaEventCreate(&stop)", __FILE__, __LINE__);
  }
  auto destroy = [&] {
    (void)cudaEventDestroy(start);
    (void)cudaEventDestroy(stop);
  };
  try {
    CANOPY_CUDA_CHECK(cudaEventRecord(start));
    work();
    CANOPY_CUDA_CHECK(cudaEventRecord(stop));
    CANOPY_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CANOPY_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    destroy();
    return 1000.0 * static_cast<double>(ms);
  } catch (...) {
    destroy();
    throw;
  }
}

summary to_summary(const timing& t) {
  return summary{t.median_us, t.min_us, t.max_us, t.samples_us.size()};
}

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

class gpu_platform;

// State of the loaded tree, shared by the runners made for it.
struct gpu_tree {
  const trees::octree* host = nullptr;
  trees::device_octree tree;
  trees::device_payloads<float> payloads;
  std::optional<canopy::gpu_scheduler> sched;
  std::optional<baseline_runner> baselines;
  // Twig tasks (trees/twig_pass.hpp), made on first use: the scheduler over the twig graph and its
  // task entries (twig_task) on the device.
  std::optional<canopy::gpu_scheduler> twig_sched;
  device_buffer<trees::twig_task> twig_tasks;

  template <class Ops>
  Ops ops() const {
    const trees::octree_ref t = tree.ref();
    return Ops{t.points, t.first_child, t.child_count, t.point_begin, t.point_count, payloads.data()};
  }
  // All bytes 0xff: NaN in every float and a count no node has, so a node a run skips cannot pass.
  void poison() const {
    CANOPY_CUDA_CHECK(cudaMemset(payloads.data(), 0xff, payloads.bytes()));
    CANOPY_CUDA_CHECK(cudaDeviceSynchronize());
  }
  trees::comparison check(std::span<const trees::multipole<double>> reference, bool perturb) const {
    auto computed = payloads.download();
    if (perturb && !computed.empty()) computed.front().mass *= 1.01f;
    return trees::compare_payloads<float>(*host, computed, reference);
  }
};

// `Ops` is upward_ops<float, Lanes> with the lane count trees::upward_lanes picks for the tree, as
// `canopy validate --backend gpu` runs it.
//
// For twig tasks `Ops` is twig_upward_ops<float, L> and the scheduler is the one over the twig graph.
template <class Ops>
class scheduler_runner final : public pass_runner {
 public:
  scheduler_runner(gpu_tree& t, canopy::gpu_scheduler& sched, canopy::mode m, Ops ops)
      : t_(t), sched_(sched), mode_(m), ops_(ops) {}

  run_outcome run_once() override {
    t_.poison();
    sched_.set_mode(mode_);
    canopy::run_result r;
    const double us = event_time_us([&] { r = sched_.run(ops_); });
    return run_outcome{r.code, r.message, us};
  }
  std::string detail() const override {
    return std::to_string(sched_.last_grid()) + " blocks x " + std::to_string(sched_.options().threads_per_block) +
           " threads, " + std::to_string(Ops::group_size) + " lanes per task";
  }
  trees::comparison check(const trees::octree&, std::span<const trees::multipole<double>> reference,
                          bool perturb) override {
    return t_.check(reference, perturb);
  }
  summary time(int warmup, int reps) override {
    sched_.set_mode(mode_);
    return to_summary(time_gpu(
        [&](cudaStream_t s) {
          const canopy::run_result r = sched_.run(ops_, s);
          if (!r.ok()) throw std::runtime_error(std::string(canopy::to_string(r.code)) + " in a timed run: " + r.message);
        },
        timing_options{warmup, reps, nullptr}));
  }

 private:
  gpu_tree& t_;
  canopy::gpu_scheduler& sched_;
  canopy::mode mode_;
  Ops ops_;
};

class baseline_pass_runner final : public pass_runner {
 public:
  baseline_pass_runner(gpu_tree& t, baseline_kind kind) : t_(t), kind_(kind) {}
  std::string detail() const override { return std::to_string(t_.baselines->group_size()) + " lanes per node"; }

  run_outcome run_once() override {
    t_.poison();
    const double us = event_time_us([&] {
      t_.baselines->run(kind_, nullptr);
      CANOPY_CUDA_CHECK(cudaGetLastError());
      CANOPY_CUDA_CHECK(cudaStreamSynchronize(nullptr));
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
          CANOPY_CUDA_CHECK(cudaGetLastError());
          CANOPY_CUDA_CHECK(cudaStreamSynchronize(s));  // a user waits for the result, as run() does
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
    CANOPY_CUDA_CHECK(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize));
    if (heap < mutex_heap_bytes && cudaDeviceSetLimit(cudaLimitMallocHeapSize, mutex_heap_bytes) != cudaSuccess)
      (void)cudaGetLastError();  // the scheduler sizes the heap itself where it still can
  }

  std::vector<std::string> backends() const override { return {std::string(backend_gpu)}; }

  std::vector<platform_facts> facts(const bench_options&) override {
    if (!facts_) {
      const device_facts d = query_device();
      int driver = 0, runtime = 0;
      CANOPY_CUDA_CHECK(cudaDriverGetVersion(&driver));
      CANOPY_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
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
    canopy::scheduler_options o = options.scheduler;
    o.deadline = std::chrono::milliseconds(static_cast<long long>(std::max(1.0, std::ceil(options.budget_ms))));
    t->sched.emplace(trees::make_upward_graph(tree), o);
    tree_ = std::move(t);
  }

  void unload() override { tree_.reset(); }

  std::unique_ptr<pass_runner> runner(const variant& v) override {
    if (!tree_) throw std::logic_error("gpu platform: no tree loaded");
    if (v.backend != backend_gpu) throw std::invalid_argument("gpu platform: cannot run backend " + v.backend);
    if (v.mode && v.twig) {
      gpu_tree& t = *tree_;
      if (!t.twig_sched) {
        const trees::twig_graph tg = trees::make_twig_graph(*t.host);
        canopy::scheduler_options o = t.sched->options();
        // Twig tasks run on groups of 8-32 lanes: 256-thread blocks moved 8% more bytes per second
        // than 128 at depth 8 on an H100 (bench/RESULTS.md), and were as fast at depth 5.
        o.threads_per_block = std::max(o.threads_per_block, 256);
        t.twig_tasks = device_buffer<trees::twig_task>(tg.tasks.size());
        t.twig_tasks.upload(tg.tasks);
        t.twig_sched.emplace(tg.graph, o);
      }
      return trees::with_twig_lanes(trees::upward_lanes(*t.host), [&](auto lanes) -> std::unique_ptr<pass_runner> {
        using ops_type = trees::twig_upward_ops<float, decltype(lanes)::value>;
        const trees::octree_ref r = t.tree.ref();
        const ops_type ops{t.twig_tasks.data(), r.points, r.first_child, r.child_count, r.point_begin, r.point_count,
                           t.payloads.data()};
        return std::make_unique<scheduler_runner<ops_type>>(t, *t.twig_sched, *v.mode, ops);
      });
    }
    if (v.mode)
      return trees::with_upward_lanes(trees::upward_lanes(*tree_->host), [&](auto lanes) -> std::unique_ptr<pass_runner> {
        using ops_type = trees::upward_ops<float, decltype(lanes)::value>;
        return std::make_unique<scheduler_runner<ops_type>>(*tree_, *tree_->sched, *v.mode, tree_->ops<ops_type>());
      });
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

bool gpu_device_present() { return device_present(); }

std::unique_ptr<platform> make_gpu_platform() {
  if (!device_present()) return nullptr;
  return std::make_unique<gpu_platform>();
}

}  // namespace canopy::bench
