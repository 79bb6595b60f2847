// SPDX-License-Identifier: Apache-2.0
// Diagnostic probe (not part of any suite): the deep random DAG that stalled in continuation at
// full occupancy, with a per-task execution count, to tell a lost task from one run twice
// (bench/RESULTS.md tells what it found). lockfree and continuation at full occupancy, 132
// and 14 blocks, three runs each, 5 s deadline.
// Usage: dag_probe [tasks=100003]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "canopy/gpu_scheduler.cuh"
#include "probe_dag.cuh"

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 100003;
  const auto g = probe::deep_dag(n);
  canopy::device_buffer<int> runs(static_cast<std::size_t>(n));
  for (canopy::mode m : {canopy::mode::lockfree, canopy::mode::continuation}) {
    for (int blocks : {0, 132, 14}) {
      canopy::scheduler_options o;
      o.mode = m;
      o.blocks = blocks;
      o.deadline = std::chrono::milliseconds(5000);
      canopy::gpu_scheduler s(g, o);
      for (int rep = 0; rep < 3; ++rep) {
        const probe::counted_run c = probe::count_runs(s, runs);
        std::printf("%-13s blocks %4d rep %d: %-8s %9.1f ms  ran %ld of %d, never %ld (first %d), more than once %ld (first %d)  %s\n",
                    canopy::to_string(m).data(), s.last_grid(), rep, canopy::to_string(c.result.code).data(), c.ms, c.total, n,
                    c.never, c.first_never, c.twice, c.first_twice, c.result.ok() ? "" : c.result.message.c_str());
      }
    }
  }
}
