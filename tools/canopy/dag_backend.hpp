// SPDX-License-Identifier: Apache-2.0
// The scheduler backends of `canopy run-dag`: one run of trees::dag_accumulate_ops over a DAG.
// The CPU backend lives in cmd_run_dag.cpp; the GPU one in dag_backend_gpu.cpp (CANOPY_GPU only),
// over canopy::dags' run_dag_accumulate_gpu.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "canopy/scheduler_options.hpp"
#include "canopy/task_graph.hpp"

namespace canopy::tool {

struct dag_run {
  std::vector<std::uint64_t> values;  ///< value[t] of every task, as the backend computed it
  std::string backend;                ///< "cpu" or "gpu"
  std::string device;                 ///< e.g. "NVIDIA H100 80GB HBM3, 132 blocks x 256 threads"
  double elapsed_us = 0;              ///< the scheduled run itself, no set-up or copies
};

/// Throws std::runtime_error (one line) when the run fails, canopy::error on bad options.
dag_run run_dag_gpu(const canopy::task_graph& graph, std::span<const std::int64_t> weights,
                    const canopy::scheduler_options& options);

}  // namespace canopy::tool
