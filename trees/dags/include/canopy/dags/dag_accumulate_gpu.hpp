// SPDX-License-Identifier: Apache-2.0
// The GPU run of dag_accumulate_ops over a DAG (dag_accumulate.hpp), as `canopy run-dag` and the
// Python module's Dag.run do it: one implementation in canopy::dags, built with CANOPY_GPU only
// (src/dag_accumulate_gpu.cu). Host-only declarations, so that callers compiled by the host
// compiler (the tool, the nanobind module) run a gpu_scheduler that only nvcc can instantiate.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "canopy/scheduler_options.hpp"
#include "canopy/status.hpp"
#include "canopy/task_graph.hpp"

namespace canopy::trees {

/// What run_dag_accumulate_gpu measured.
struct dag_gpu_run {
  std::vector<std::uint64_t> values;  ///< value[t] of every task, as the timed run computed it
  canopy::run_result result;          ///< the timed run's (the warm run's when that one failed)
  std::string device;                 ///< "<GPU name>, B blocks x T threads"
  double elapsed_us = 0;              ///< the timed run (CUDA events), no set-up or copies
};

/// Uploads the predecessor lists and the weights, runs dag_accumulate_ops once untimed (module
/// load, occupancy query, first touch), then once timed from zeroed values (a task that ran
/// before a predecessor would otherwise read the warm run's correct value, and a check against
/// reference_dag_accumulate could not see it), and downloads the values. On the legacy default
/// stream, synchronously. A failed run is reported in `result` (values then empty); throws
/// std::invalid_argument when `weights` is not one entry per task, canopy::error for bad options
/// and canopy::cuda_error when CUDA fails.
dag_gpu_run run_dag_accumulate_gpu(const canopy::task_graph& graph, std::span<const std::int64_t> weights,
                                   const canopy::scheduler_options& options);

}  // namespace canopy::trees
