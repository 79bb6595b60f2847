// SPDX-License-Identifier: Apache-2.0
// Shared by the tuning probes (bench/probes, not part of any suite): timing helpers, the no-op and
// counting task bodies, the no-op tree, and the device clock. Plumbing comes from the public CUDA
// layer (canopy/cuda/); nothing here reaches into the runtime's detail/ headers, so that the probes
// keep compiling when the runtime's internals move.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "canopy/cuda/error.hpp"
#include "canopy/cuda/event.hpp"
#include "canopy/task_graph.hpp"

namespace probe {

/// argv[i] as a positive integer, `fallback` when it is not given; anything else prints one line
/// naming the probe and the argument and exits with 2.
inline int positive_arg(int argc, char** argv, int i, int fallback, const char* probe_name, const char* what) {
  if (argc <= i) return fallback;
  const int v = std::atoi(argv[i]);
  if (v < 1) {
    std::fprintf(stderr, "%s: %s must be a positive integer (got '%s')\n", probe_name, what, argv[i]);
    std::exit(2);
  }
  return v;
}

/// The median of `v` (upper median for an even count; the probes print medians of 50-500 samples).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// The median of `reps` calls of `f` (each enqueues work and waits) in microseconds, timed with
/// CUDA events around the call on `stream`, after 3 untimed warm-up calls. Events, not a host
/// clock: these figures are the ones bench/RESULTS.md compares from one change to the next.
template <class F>
double median_us(F&& f, int reps = 50, cudaStream_t stream = nullptr) {
  canopy::cuda_event a, b;
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> v;
  v.reserve(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    a.record(stream);
    f();
    b.record(stream);
    v.push_back(1e3 * canopy::elapsed_ms(a, b));
  }
  return median(std::move(v));
}

/// The median of `reps` calls of `f` in microseconds on the host's steady clock (launch to the
/// return of the wait), after 20 warm-up calls: what a caller waits, which events do not see.
template <class F>
double host_median_us(F&& f, int reps = 500) {
  for (int i = 0; i < 20; ++i) f();
  std::vector<double> v;
  v.reserve(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    const auto b = std::chrono::steady_clock::now();
    v.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  return median(std::move(v));
}

/// The device's global timer in ns (the clock every SM shares; 1 us resolution on some parts).
/// The probes' own copy: the runtime keeps one in its internals.
__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void empty_kernel() {}

/// Task bodies that do nothing: what is left is the scheduler's own cost.
struct noop_ops {
  __device__ void operator()(canopy::task_id) const {}
};

/// Counts every task's executions (runs[t] += 1), to tell a lost task from one run twice.
struct counting_ops {
  int* runs;
  __device__ void operator()(canopy::task_id t) const { atomicAdd(runs + t, 1); }
};

/// A complete 8-ary tree of `n` tasks in heap order (task i's parent is (i - 1) / 8): 37,449 tasks
/// is the shape of a depth-5 octree without its payload work.
inline canopy::task_graph noop_tree(int n) {
  std::vector<canopy::task_id> parent(static_cast<std::size_t>(n), 0);
  parent[0] = canopy::no_task;
  for (int i = 1; i < n; ++i) parent[static_cast<std::size_t>(i)] = (i - 1) / 8;
  return canopy::task_graph::from_parents(parent);
}

}  // namespace probe
