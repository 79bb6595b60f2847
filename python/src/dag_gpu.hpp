// SPDX-License-Identifier: Apache-2.0
// The GPU run of trees::dag_accumulate_ops over a DAG (dag_gpu.cu, built with CANOPY_GPU only):
// host-only declarations so that the binding, compiled by the host compiler with nanobind, calls
// a gpu_scheduler that only nvcc can instantiate.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "canopy/scheduler_options.hpp"
#include "canopy/status.hpp"
#include "canopy/task_graph.hpp"

namespace canopy::python {

struct dag_gpu_run {
  std::vector<std::uint64_t> values;  // value[t] of every task
  canopy::run_result result;          // the timed run's
  std::string device;                 // "<GPU name>, B blocks x T threads"
  double elapsed_us = 0;              // the timed run (CUDA events), no copies
};

/// An untimed warm run, then a timed run from zeroed values (a task that ran before a predecessor
/// would otherwise read the warm run's correct value). Throws canopy::error for bad options,
/// cuda_error when CUDA fails; a failed run is reported in `result`.
dag_gpu_run run_dag_gpu(const canopy::task_graph& graph, std::span<const std::int64_t> weights,
                        const canopy::scheduler_options& options);

}  // namespace canopy::python
