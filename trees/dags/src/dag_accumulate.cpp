// SPDX-License-Identifier: Apache-2.0
#include <canopy/dags/dag_accumulate.hpp>

#include <stdexcept>
#include <string>

namespace canopy::trees {

std::vector<std::uint64_t> reference_dag_accumulate(const canopy::task_graph& graph, std::span<const std::int64_t> weights) {
  const std::size_t n = static_cast<std::size_t>(graph.task_count());
  if (weights.size() != n)
    throw std::invalid_argument("reference_dag_accumulate: " + std::to_string(weights.size()) + " weights for " +
                                std::to_string(n) + " tasks");
  const auto& pred_offsets = graph.pred_offsets();
  const auto& preds = graph.predecessors();
  // Successor lists by inverting the predecessor lists: the reference reads nothing else of the graph.
  std::vector<std::int32_t> succ_offsets(n + 1, 0);
  for (const task_id p : preds) ++succ_offsets[static_cast<std::size_t>(p) + 1];
  for (std::size_t t = 0; t < n; ++t) succ_offsets[t + 1] += succ_offsets[t];
  std::vector<task_id> succ(preds.size());
  std::vector<std::int32_t> fill(succ_offsets.begin(), succ_offsets.end() - 1);
  std::vector<std::int32_t> waiting(n);
  for (std::size_t t = 0; t < n; ++t) {
    waiting[t] = pred_offsets[t + 1] - pred_offsets[t];
    for (std::int32_t i = pred_offsets[t]; i < pred_offsets[t + 1]; ++i)
      succ[static_cast<std::size_t>(fill[static_cast<std::size_t>(preds[static_cast<std::size_t>(i)])]++)] = static_cast<task_id>(t);
  }

  std::vector<std::uint64_t> values(n, 0);
  const dag_accumulate_ops ops{pred_offsets.data(), preds.data(), weights.data(), values.data()};
  std::vector<task_id> ready;
  for (std::size_t t = 0; t < n; ++t)
    if (waiting[t] == 0) ready.push_back(static_cast<task_id>(t));
  std::size_t done = 0;
  while (!ready.empty()) {
    const task_id t = ready.back();
    ready.pop_back();
    ops(t);
    ++done;
    for (std::int32_t i = succ_offsets[static_cast<std::size_t>(t)]; i < succ_offsets[static_cast<std::size_t>(t) + 1]; ++i)
      if (--waiting[static_cast<std::size_t>(succ[static_cast<std::size_t>(i)])] == 0) ready.push_back(succ[static_cast<std::size_t>(i)]);
  }
  if (done != n) throw std::invalid_argument("reference_dag_accumulate: the graph has a cycle");
  return values;
}

}  // namespace canopy::trees
