// SPDX-License-Identifier: Apache-2.0
// See canopy/dags/dag_accumulate_gpu.hpp.
#include "canopy/dags/dag_accumulate_gpu.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "canopy/cuda/device.hpp"
#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/event.hpp"
#include "canopy/dags/dag_accumulate.hpp"
#include "canopy/gpu_scheduler.cuh"

namespace canopy::trees {

dag_gpu_run run_dag_accumulate_gpu(const canopy::task_graph& graph, std::span<const std::int64_t> weights,
                                   const canopy::scheduler_options& options) {
  const std::size_t n = static_cast<std::size_t>(graph.task_count());
  if (weights.size() != n)
    throw std::invalid_argument("run_dag_accumulate_gpu: " + std::to_string(weights.size()) + " weights for " +
                                std::to_string(n) + " tasks");
  canopy::gpu_scheduler sched(graph, options);
  const canopy::device_buffer<std::int32_t> pred_offsets(graph.pred_offsets());
  const canopy::device_buffer<canopy::task_id> preds(graph.predecessors());
  const canopy::device_buffer<std::int64_t> weights_d(weights);
  canopy::device_buffer<std::uint64_t> values(std::max<std::size_t>(n, 1));
  const dag_accumulate_ops ops{pred_offsets.data(), preds.data(), weights_d.data(), values.data()};

  dag_gpu_run out;
  out.result = sched.run(ops);  // untimed
  if (!out.result.ok()) return out;
  values.fill_bytes(0);
  canopy::cuda_event start, stop;
  start.record();
  out.result = sched.run(ops);
  stop.record();
  out.elapsed_us = canopy::elapsed_ms(start, stop) * 1000.0;
  if (!out.result.ok()) return out;
  out.values = values.download();
  out.values.resize(n);
  out.device = canopy::gpu_name() + ", " + std::to_string(std::max(sched.last_grid(), 0)) + " blocks x " +
               std::to_string(options.threads_per_block) + " threads";
  return out;
}

}  // namespace canopy::trees
