// The GPU backend of the tool: upload the tree, run the persistent kernel once, download.
#include <cuda_runtime.h>

#include "backends_detail.hpp"
#include "canopy/gpu_scheduler.cuh"
#include "canopy/trees/device_octree.cuh"
#include "canopy/trees/upward_pass.hpp"

namespace canopy::tool {

bool gpu_available() { return canopy::gpu_available(); }

backend_result run_gpu(const canopy::trees::octree& tree, const backend_options& options) {
  namespace ct = canopy::trees;
  const auto opts = to_scheduler_options(options);
  ct::device_octree dtree(tree);
  ct::device_payloads<float> payloads(tree.node_count());
  canopy::gpu_scheduler sched(ct::make_upward_graph(tree), opts);
  const ct::octree_ref t = dtree.ref();
  const ct::upward_ops<float> ops{t.points, t.first_child, t.child_count, t.point_begin, t.point_count, payloads.data()};
  // One untimed run first: module load, first-touch of the tree and the occupancy query stay out
  // of the reported time, which is then one warm launch plus synchronisation.
  throw_if_failed(sched.run(ops), "gpu");
  cudaEvent_t start, stop;
  canopy::detail::cuda_check(cudaEventCreate(&start), "cudaEventCreate");
  canopy::detail::cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
  canopy::detail::cuda_check(cudaEventRecord(start), "cudaEventRecord");
  const auto r = sched.run(ops);
  canopy::detail::cuda_check(cudaEventRecord(stop), "cudaEventRecord");
  canopy::detail::cuda_check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  canopy::detail::cuda_check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  throw_if_failed(r, "gpu");
  backend_result out;
  out.payloads = payloads.download();
  out.backend = "gpu";
  cudaDeviceProp prop{};
  canopy::detail::cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  out.device = std::string(prop.name) + ", " + std::to_string(sched.last_grid()) + " blocks x " +
               std::to_string(opts.threads_per_block) + " threads, mode " + std::string(canopy::to_string(opts.mode));
  out.elapsed_us = ms * 1000.0;
  return out;
}

}  // namespace canopy::tool
