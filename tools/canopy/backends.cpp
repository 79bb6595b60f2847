// The scheduler backends behind `canopy accumulate` and `canopy validate`: option parsing shared by
// both, the CPU backend, and dispatch to the GPU backend (backends_gpu.cu) when it is built.
#include "backends.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "backends_detail.hpp"
#include "canopy/cpu_scheduler.hpp"
#include "canopy/trees/twig_pass.hpp"
#include "canopy/trees/upward_pass.hpp"

namespace canopy::tool {

canopy::scheduler_options to_scheduler_options(const backend_options& o) {
  canopy::scheduler_options s;
  const auto m = canopy::parse_mode(o.mode);
  if (!m) throw std::invalid_argument("unknown mode '" + o.mode + "' (mutex, fixed-queue, private-queues, all-threads, lockfree-tree, shared-queues, lockfree, continuation)");
  const auto p = canopy::parse_push_policy(o.push_policy);
  if (!p) throw std::invalid_argument("unknown push policy '" + o.push_policy + "' (round-robin, least-loaded, locality)");
  if (o.blocks < 0) throw std::invalid_argument("--blocks must be >= 0");
  if (o.queue_capacity < 0) throw std::invalid_argument("--queue-capacity must be >= 0");
  if (!(o.deadline_ms > 0)) throw std::invalid_argument("--deadline-ms must be positive");
  if (o.reps < 1) throw std::invalid_argument("--reps must be >= 1");
  s.mode = *m;
  s.policy = *p;
  s.blocks = o.blocks;
  s.threads_per_block = o.threads_per_block;
  s.global_queue_capacity = o.queue_capacity;
  s.deadline = std::chrono::milliseconds(static_cast<long long>(o.deadline_ms));
  return s;
}

void summarise_times(std::vector<double> samples, backend_result& r) {
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  r.elapsed_us = n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  r.min_us = samples.front();
  r.max_us = samples.back();
  r.reps = static_cast<int>(n);
}

bool twig_tasks(const backend_options& o, bool gpu) {
  if (o.tasks != "auto" && o.tasks != "node" && o.tasks != "twig")
    throw std::invalid_argument("unknown --tasks '" + o.tasks + "' (auto, node, twig)");
  // auto: twig tasks on the GPU, where they were faster on every tree measured (bench/RESULTS.md);
  // node tasks on the CPU, where twig tasks were not faster (depth 6 on 2 workers: 18.0 against
  // 13.1 ms).
  return o.tasks == "twig" || (o.tasks == "auto" && gpu);
}

void throw_if_failed(const canopy::run_result& r, const std::string& backend) {
  if (!r.ok()) throw std::runtime_error(backend + " backend: " + std::string(canopy::to_string(r.code)) + ": " + r.message);
}

namespace {

template <class Ops>
void time_cpu_runs(canopy::cpu_scheduler& sched, const Ops& ops, const backend_options& options, backend_result& out) {
  std::vector<double> samples;
  for (int i = 0; i < options.reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const auto r = sched.run(ops);
    samples.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    throw_if_failed(r, "cpu");
  }
  summarise_times(std::move(samples), out);
}

backend_result run_cpu(const canopy::trees::octree& tree, const backend_options& options) {
  namespace ct = canopy::trees;
  const auto opts = to_scheduler_options(options);
  backend_result out;
  out.payloads.resize(static_cast<std::size_t>(tree.node_count()));
  int workers = 0;
  const bool twig = twig_tasks(options, false);
  if (twig) {
    const ct::twig_graph tg = ct::make_twig_graph(tree);
    canopy::cpu_scheduler sched(tg.graph, opts);
    time_cpu_runs(sched, ct::host_twig_upward_ops<float>(tree, tg.tasks, out.payloads.data()), options, out);
    workers = sched.worker_count();
  } else {
    canopy::cpu_scheduler sched(ct::make_upward_graph(tree), opts);
    time_cpu_runs(sched, ct::host_upward_ops<float>(tree, out.payloads.data()), options, out);
    workers = sched.worker_count();
  }
  out.backend = "cpu";
  out.device = std::to_string(workers) + " CPU workers, " + (twig ? "twig" : "node") + " tasks";
  return out;
}

}  // namespace

#if !CANOPY_HAVE_GPU
bool gpu_available() { return false; }
backend_result run_gpu(const canopy::trees::octree&, const backend_options&) {
  throw std::runtime_error("gpu backend: this canopy was built without CUDA support (CANOPY_GPU=OFF)");
}
#endif

backend_result run_backend(const canopy::trees::octree& tree, const backend_options& options) {
  std::string backend = options.backend;
  if (backend == "auto") backend = gpu_available() ? "gpu" : "cpu";
  if (backend == "cpu") return run_cpu(tree, options);
  if (backend == "gpu") {
    if (!gpu_available()) throw std::runtime_error("gpu backend: no CUDA device is available (use --backend cpu)");
    return run_gpu(tree, options);
  }
  throw std::invalid_argument("unknown backend '" + options.backend + "' (reference, cpu, gpu, auto)");
}

}  // namespace canopy::tool
