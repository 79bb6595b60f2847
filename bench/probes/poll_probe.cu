// SPDX-License-Identifier: Apache-2.0
// Tuning probe (not part of any suite): the idle blocks' sleep cap (scheduler_options::
// idle_sleep_max) against the deep random DAG at full occupancy (where polling starved the working
// block; probe_dag.cuh) and against small trees (where a long sleep delays the end of the run):
// octrees of depth 5 and 6 (validated before timing) and a no-op tree of 37,449 tasks. DAG runs
// count every task's executions. The figures are in bench/RESULTS.md.
// Usage: poll_probe [tasks=100003] [cap_ns ...]   (caps default to 2048 0 8192 32768; 0 = auto)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "canopy/gpu_scheduler.cuh"
#include "canopy/passes/upward_pass.hpp"
#include "probe_common.cuh"
#include "probe_dag.cuh"
#include "probe_trees.cuh"

namespace ct = canopy::trees;

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 100003;
  const auto g = probe::deep_dag(n);
  canopy::device_buffer<int> runs(static_cast<std::size_t>(n));
  probe::tree_case trees[] = {probe::complete_case(5), probe::complete_case(6)};
  const auto noop_tree = probe::noop_tree(37449);

  std::vector<long> caps;
  for (int i = 2; i < argc; ++i) caps.push_back(std::atol(argv[i]));
  if (caps.empty()) caps = {2048, 0, 8192, 32768};
  for (long cap : caps) {
    const char* capname = cap == 0 ? "auto" : "";
    for (canopy::mode m : {canopy::mode::continuation, canopy::mode::lockfree}) {
      for (int blocks : {0, 132}) {
        if (blocks == 132 && m == canopy::mode::lockfree) continue;
        canopy::scheduler_options o;
        o.mode = m;
        o.blocks = blocks;
        o.idle_sleep_max = std::chrono::nanoseconds(cap);
        o.deadline = std::chrono::milliseconds(4000);
        canopy::gpu_scheduler s(g, o);
        const probe::counted_run c = probe::count_runs(s, runs);
        std::printf("cap %5ld%-4s deep dag %6d %-13s blocks %4d: %-8s %9.1f ms  ran %ld, twice %ld, %.2f us/task\n", cap, capname, n,
                    canopy::to_string(m).data(), s.last_grid(), canopy::to_string(c.result.code).data(), c.ms, c.total, c.twice,
                    1000.0 * c.ms / std::max(1L, c.total));
      }
    }
    for (canopy::mode m : {canopy::mode::continuation, canopy::mode::lockfree}) {
      for (probe::tree_case& c : trees) {
        canopy::scheduler_options o;
        o.mode = m;
        o.idle_sleep_max = std::chrono::nanoseconds(cap);
        canopy::gpu_scheduler s(ct::make_upward_graph(c.tree), o);
        ct::with_upward_lanes(ct::upward_lanes(c.tree), [&](auto L) {
          const auto ops = probe::node_ops<L()>(c);
          c.poison();
          const auto r = s.run(ops);
          const bool ok = r.ok() && c.valid();
          const double us = ok ? probe::median_us([&] { s.run(ops); }, 50) : -1;
          std::printf("cap %5ld%-4s %-8s octree  %-13s blocks %4d: %s %9.1f us\n", cap, capname, c.name.c_str(),
                      canopy::to_string(m).data(), s.last_grid(), ok ? "ok " : "BAD", us);
          return 0;
        });
      }
      canopy::scheduler_options o;
      o.mode = m;
      o.idle_sleep_max = std::chrono::nanoseconds(cap);
      canopy::gpu_scheduler s(noop_tree, o);
      std::printf("cap %5ld%-4s noop tree 37449 %-13s blocks full: %9.1f us\n", cap, capname, canopy::to_string(m).data(),
                  probe::median_us([&] { s.run(probe::noop_ops{}); }, 50));
    }
  }
}
