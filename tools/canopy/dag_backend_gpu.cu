// SPDX-License-Identifier: Apache-2.0
// The GPU backend of `canopy run-dag`: upload the predecessor lists and weights, run the
// persistent kernel once warm, then once timed from zeroed values, and download the values.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "backends.hpp"
#include "canopy/cuda/device.hpp"
#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/event.hpp"
#include "canopy/dags/dag_accumulate.hpp"
#include "canopy/gpu_scheduler.cuh"
#include "dag_backend.hpp"

namespace canopy::tool {

dag_run run_dag_gpu(const canopy::task_graph& graph, std::span<const std::int64_t> weights,
                    const canopy::scheduler_options& options) {
  const std::size_t n = static_cast<std::size_t>(graph.task_count());
  canopy::gpu_scheduler sched(graph, options);
  const canopy::device_buffer<std::int32_t> pred_offsets(graph.pred_offsets());
  const canopy::device_buffer<canopy::task_id> preds(graph.predecessors());
  const canopy::device_buffer<std::int64_t> weights_d(weights);
  canopy::device_buffer<std::uint64_t> values(std::max<std::size_t>(n, 1));
  const canopy::trees::dag_accumulate_ops ops{pred_offsets.data(), preds.data(), weights_d.data(), values.data()};

  // An untimed run first (module load, occupancy query, first touch). The timed run starts from
  // zeroed values: a task that ran before a predecessor would otherwise read the warm run's
  // correct value and the check could not see it.
  throw_if_failed(sched.run(ops), "gpu");
  values.fill_bytes(0);
  canopy::cuda_event start, stop;
  start.record();
  const auto r = sched.run(ops);
  stop.record();
  const float ms = canopy::elapsed_ms(start, stop);
  throw_if_failed(r, "gpu");

  dag_run out;
  out.values = values.download();
  out.values.resize(n);
  out.backend = "gpu";
  out.device = canopy::gpu_name() + ", " + std::to_string(std::max(sched.last_grid(), 0)) + " blocks x " +
               std::to_string(options.threads_per_block) + " threads";
  out.elapsed_us = ms * 1000.0;
  return out;
}

}  // namespace canopy::tool
