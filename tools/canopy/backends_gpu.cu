// The GPU backend of the tool: upload the tree, run the persistent kernel once, download.
#include <cuda_runtime.h>

#include "backends_detail.hpp"
#include "canopy/gpu_scheduler.cuh"
#include "canopy/trees/device_octree.cuh"
#include "canopy/trees/twig_pass.hpp"
#include "canopy/trees/upward_pass.hpp"

#include <span>

namespace canopy::tool {

bool gpu_available() { return canopy::gpu_available(); }

namespace {

/// `tasks`: "twig" or "node", for the result's description.
template <class Ops>
backend_result run_with(const canopy::trees::octree& tree, const canopy::task_graph& graph, const backend_options& options,
                        canopy::trees::device_payloads<float>& payloads, const Ops& ops, const char* tasks) {
  namespace ct = canopy::trees;
  const auto opts = to_scheduler_options(options);
  canopy::gpu_scheduler sched(graph, opts);
  // One untimed run first: module load, first-touch of the tree and the occupancy query stay out
  // of the reported time, which is then one warm launch plus synchronisation.
  throw_if_failed(sched.run(ops), "gpu");
  cudaEvent_t start, stop;
  canopy::cuda_check(cudaEventCreate(&start), "cudaEventCreate");
  canopy::cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> samples;
  canopy::run_result r;
  for (int i = 0; i < options.reps && r.ok(); ++i) {
    canopy::cuda_check(cudaEventRecord(start), "cudaEventRecord");
    r = sched.run(ops);
    canopy::cuda_check(cudaEventRecord(stop), "cudaEventRecord");
    canopy::cuda_check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    canopy::cuda_check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    samples.push_back(ms * 1000.0);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  throw_if_failed(r, "gpu");
  // The payloads checked come from one more run into a poisoned buffer (all bits set: NaN
  // payloads, count 2^32-1), so a run that skipped nodes cannot pass on an earlier run's results.
  canopy::cuda_check(cudaMemset(payloads.data(), 0xff, sizeof(ct::multipole<float>) * static_cast<std::size_t>(tree.node_count())),
                             "cudaMemset");
  throw_if_failed(sched.run(ops), "gpu");
  backend_result out;
  out.payloads = payloads.download();
  out.backend = "gpu";
  cudaDeviceProp prop{};
  canopy::cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  out.device = std::string(prop.name) + ", " + std::to_string(sched.last_grid()) + " blocks x " +
               std::to_string(opts.threads_per_block) + " threads, " + tasks + " tasks of " +
               std::to_string(Ops::group_size) + " lanes, mode " + std::string(canopy::to_string(opts.mode));
  summarise_times(std::move(samples), out);
  return out;
}

}  // namespace

backend_result run_gpu(const canopy::trees::octree& tree, const backend_options& options) {
  namespace ct = canopy::trees;
  ct::device_octree dtree(tree);
  ct::device_payloads<float> payloads(tree.node_count());
  const ct::octree_ref t = dtree.ref();
  if (twig_tasks(options, true)) {
    const ct::twig_graph tg = ct::make_twig_graph(tree);
    const ct::detail::device_array<ct::twig_task> tasks{std::span<const ct::twig_task>(tg.tasks)};
    return ct::with_twig_lanes(ct::upward_lanes(tree), [&](auto lanes) {
      const ct::twig_upward_ops<float, lanes()> ops{tasks.data(),     t.points,   t.first_child, t.child_count,
                                                     t.point_begin, t.point_count, payloads.data()};
      return run_with(tree, tg.graph, options, payloads, ops, "twig");
    });
  }
  return ct::with_upward_lanes(ct::upward_lanes(tree), [&](auto lanes) {
    const ct::upward_ops<float, lanes()> ops{t.points, t.first_child, t.child_count, t.point_begin, t.point_count,
                                              payloads.data()};
    return run_with(tree, ct::make_upward_graph(tree), options, payloads, ops, "node");
  });
}

}  // namespace canopy::tool
