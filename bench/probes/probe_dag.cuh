// SPDX-License-Identifier: Apache-2.0
// Shared by the DAG probes (dag_probe, poll_probe; not part of any suite): the deep random DAG that
// stalled at full occupancy (tests/common/random_dag.hpp's `deep` shape: a chain, each task also
// waiting for up to two random earlier ones), and one scheduler run over it with every task's
// executions counted, so that a slow run can be told from a lost task or one run twice.
#pragma once

#include <cstdio>
#include <vector>

#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/event.hpp"
#include "canopy/gpu_scheduler.cuh"
#include "probe_common.cuh"
#include "random_dag.hpp"

namespace probe {

inline canopy::task_graph deep_dag(int n) {
  const auto d = canopy::test::make_random_dag(n, canopy::test::dag_shape::deep, 1);
  return canopy::task_graph::from_edges(d.task_count, d.edges);
}

struct counted_run {
  canopy::run_result result;
  double ms = 0;        // CUDA events around run(): launch and wait
  long total = 0;       // executions of all tasks (the task count when exact)
  long never = 0;       // tasks that did not run
  long twice = 0;       // tasks that ran more than once
  int first_never = -1;
  int first_twice = -1;
};

/// One run of `s` with counting_ops over `runs` (one counter per task, zeroed first).
inline counted_run count_runs(canopy::gpu_scheduler& s, canopy::device_buffer<int>& runs) {
  counted_run c;
  runs.fill_bytes(0);
  canopy::cuda_event a, b;
  a.record();
  c.result = s.run(counting_ops{runs.data()});
  b.record();
  c.ms = canopy::elapsed_ms(a, b);
  const std::vector<int> h = runs.download();
  for (std::size_t t = 0; t < h.size(); ++t) {
    c.total += h[t];
    if (h[t] == 0 && c.never++ == 0) c.first_never = static_cast<int>(t);
    if (h[t] > 1 && c.twice++ == 0) c.first_twice = static_cast<int>(t);
  }
  return c;
}

}  // namespace probe
