// SPDX-License-Identifier: Apache-2.0
// The GPU backend of `canopy run-dag`: canopy::dags' run of dag_accumulate (warm run, then a timed
// run from zeroed values), its failure turned into the tool's one-line error.
#include <utility>

#include "backends.hpp"
#include "canopy/dags/dag_accumulate_gpu.hpp"
#include "dag_backend.hpp"

namespace canopy::tool {

dag_run run_dag_gpu(const canopy::task_graph& graph, std::span<const std::int64_t> weights,
                    const canopy::scheduler_options& options) {
  canopy::trees::dag_gpu_run r = canopy::trees::run_dag_accumulate_gpu(graph, weights, options);
  throw_if_failed(r.result, "gpu");
  dag_run out;
  out.values = std::move(r.values);
  out.backend = "gpu";
  out.device = std::move(r.device);
  out.elapsed_us = r.elapsed_us;
  return out;
}

}  // namespace canopy::tool
