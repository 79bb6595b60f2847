// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the GPU stress tests: a device clock, a kernel-side deadline, and the
// value-mixing operation of tests/cpu/stress/stress_graphs.hpp on the device.
#pragma once

#include <cuda/atomic>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include <cstdint>
#include <vector>

#include "canopy/task_graph.hpp"
#include "gpu_test.hpp"
#include "stress_graphs.hpp"

namespace canopy::testing {

/// Nanoseconds from the GPU's global timer (the same clock on every SM).
__device__ inline std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// value[t] = mix of seed_value(t) and its predecessors' values; runs[t] counts executions;
/// early counts reads of a predecessor that had not finished (its run count was not 1).
struct mix_ops {
  const std::int32_t* pred_offsets;
  const task_id* preds;
  unsigned long long* value;
  unsigned int* runs;
  unsigned int* early;
  __device__ void operator()(task_id t) const {
    std::uint64_t v = seed_value(t);
    for (std::int32_t j = pred_offsets[t]; j < pred_offsets[t + 1]; ++j) {
      const task_id p = preds[j];
      if (cuda::atomic_ref<unsigned int, cuda::thread_scope_device>(runs[p]).load(cuda::std::memory_order_relaxed) != 1)
        atomicAdd(early, 1u);
      v = mix_value(v, value[p]);
    }
    value[t] = v;
    atomicAdd(runs + t, 1u);
  }
};

/// Device copies of a graph's predecessor lists and the outputs of mix_ops.
struct mix_run {
  const task_graph& g;
  canopy::device_buffer<std::int32_t> pred_offsets{g.pred_offsets()};
  canopy::device_buffer<task_id> preds{g.predecessors().empty() ? std::vector<task_id>{0} : g.predecessors()};
  canopy::device_buffer<unsigned long long> value{static_cast<std::size_t>(std::max(1, g.task_count()))};
  canopy::device_buffer<unsigned int> runs{static_cast<std::size_t>(std::max(1, g.task_count()))};
  canopy::device_buffer<unsigned int> early{1};
  explicit mix_run(const task_graph& graph) : g(graph) {}

  mix_ops ops() {
    value.fill_bytes(0);
    runs.fill_bytes(0);
    early.fill_bytes(0);
    return mix_ops{pred_offsets.data(), preds.data(), value.data(), runs.data(), early.data()};
  }
  /// Describes what is wrong with the last run's outputs ("" when every task ran once, in order,
  /// with the reference value).
  std::string check(const std::vector<std::uint64_t>& expect) const {
    const auto v = value.download();
    const auto r = runs.download();
    const auto e = early.download();
    int missing = 0, repeated = 0, wrong = 0;
    task_id first = no_task;
    for (task_id t = 0; t < g.task_count(); ++t) {
      const bool bad = r[t] != 1 || v[t] != expect[t];
      missing += r[t] == 0;
      repeated += r[t] > 1;
      wrong += r[t] == 1 && v[t] != expect[t];
      if (bad && first == no_task) first = t;
    }
    if (missing + repeated + wrong == 0 && e[0] == 0) return {};
    return std::to_string(missing) + " tasks never ran, " + std::to_string(repeated) + " ran more than once, " +
           std::to_string(wrong) + " wrong values, " + std::to_string(e[0]) + " early reads; first bad task " +
           std::to_string(first);
  }
  /// FNV-1a over (runs, value) of every task: the run's count fingerprint.
  std::uint64_t fingerprint() const {
    const auto v = value.download();
    const auto r = runs.download();
    std::uint64_t h = 1469598103934665603ull;
    for (task_id t = 0; t < g.task_count(); ++t) {
      for (std::uint64_t w : {static_cast<std::uint64_t>(r[t]), static_cast<std::uint64_t>(v[t])}) {
        for (int b = 0; b < 8; ++b) h = (h ^ ((w >> (8 * b)) & 0xff)) * 1099511628211ull;
      }
    }
    return h;
  }
};

}  // namespace canopy::testing
