// SPDX-License-Identifier: Apache-2.0
// See dag_gpu.hpp. Stream: the legacy default stream, like every synchronous run of the library.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "canopy/cuda/device.hpp"
#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/event.hpp"
#include "canopy/dags/dag_accumulate.hpp"
#include "canopy/gpu_scheduler.cuh"
#include "dag_gpu.hpp"

namespace canopy::python {

dag_gpu_run run_dag_gpu(const canopy::task_graph& graph, std::span<const std::int64_t> weights,
                        const canopy::scheduler_options& options) {
  const std::size_t n = static_cast<std::size_t>(graph.task_count());
  canopy::gpu_scheduler sched(graph, options);
  const canopy::device_buffer<std::int32_t> pred_offsets(graph.pred_offsets());
  const canopy::device_buffer<canopy::task_id> preds(graph.predecessors());
  const canopy::device_buffer<std::int64_t> weights_d(weights);
  canopy::device_buffer<std::uint64_t> values(std::max<std::size_t>(n, 1));
  const canopy::trees::dag_accumulate_ops ops{pred_offsets.data(), preds.data(), weights_d.data(), values.data()};

  dag_gpu_run out;
  out.result = sched.run(ops);
  if (!out.result.ok()) return out;
  values.fill_bytes(0);
  canopy::cuda_event start, stop;
  start.record();
  out.result = sched.run(ops);
  stop.record();
  out.elapsed_us = canopy::elapsed_ms(start, stop) * 1000.0;
  out.values = values.download();
  out.values.resize(n);
  out.device = canopy::gpu_name() + ", " + std::to_string(std::max(sched.last_grid(), 0)) + " blocks x " +
               std::to_string(options.threads_per_block) + " threads";
  return out;
}

}  // namespace canopy::python
