// SPDX-License-Identifier: Apache-2.0
// A checkable computation over a general DAG, run by `canopy run-dag` and the DAG tests:
//
//   value[t] = weight[t] + 1 + sum of value[p] over t's predecessors p     (mod 2^64)
//
// so value[t] counts the weighted paths that end at t. Every value is at least 1 (unless it wraps),
// so a task that ran before one of its predecessors had published reads a 0 and its value, and
// every value downstream of it, differs from the reference. Unsigned wraparound keeps the result
// exact and independent of the order in which a task's predecessors are summed.
//
// Portable: the ops compile with g++ and nvcc; the reference is host code in the trees library.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "canopy/config.hpp"
#include "canopy/task_graph.hpp"

namespace canopy::trees {

/// The task operation, over the graph's predecessor CSR (task_graph::pred_offsets/predecessors)
/// and the weights, in host or device memory. Trivially copyable: passed by value to the kernel.
struct dag_accumulate_ops {
  const std::int32_t* pred_offsets;
  const task_id* predecessors;
  const std::int64_t* weights;
  std::uint64_t* values;

  CANOPY_HD void operator()(task_id t) const {
    std::uint64_t v = static_cast<std::uint64_t>(weights[t]) + 1u;
    for (std::int32_t i = pred_offsets[t]; i < pred_offsets[t + 1]; ++i) v += values[predecessors[i]];
    values[t] = v;
  }
};
static_assert(std::is_trivially_copyable_v<dag_accumulate_ops>);

/// The serial reference: the same formula in a topological order found by Kahn's algorithm over
/// the predecessor lists (independent of the scheduler's counters and queues). `weights` has one
/// entry per task. Throws std::invalid_argument if the sizes differ.
std::vector<std::uint64_t> reference_dag_accumulate(const canopy::task_graph& graph, std::span<const std::int64_t> weights);

}  // namespace canopy::trees
