// SPDX-License-Identifier: Apache-2.0
// Internals shared by the atomics lab's experiments (nvcc only).
#pragma once

#include <cuda/atomic>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "atomics_lab.hpp"
#include "canopy/atomics/counting_ref.hpp"
#include "common/gpu_timing.cuh"
#include "common/results.hpp"

namespace canopy::bench::lab {

inline constexpr int block_size = 256;
inline constexpr auto relaxed = cuda::std::memory_order_relaxed;

// Deterministic data: every input element is a pure function of its index, so the device
// generates it in place and the host oracle recomputes it without copying the inputs back.
__host__ __device__ inline std::uint32_t hash32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}
__host__ __device__ inline std::uint32_t hash2(std::uint32_t a, std::uint32_t b) {
  return hash32(a ^ hash32(b + 0x9e3779b9U));
}

inline unsigned blocks_for(std::uint64_t n, int per_block = block_size) {
  return static_cast<unsigned>(std::max<std::uint64_t>(1, (n + static_cast<std::uint64_t>(per_block) - 1) /
                                                              static_cast<std::uint64_t>(per_block)));
}

/// The counter a variant's kernel uses: a plain device-scope atomic_ref for timed runs, wrapped
/// in canopy::atomics::counting_ref for the validation run that counts global atomics.
template <bool Count, class T>
__device__ __forceinline__ auto global_ref(T* target, unsigned long long* tally) {
  cuda::atomic_ref<T, cuda::thread_scope_device> ref(*target);
  if constexpr (Count) {
    return canopy::atomics::counting_ref{ref, tally};
  } else {
    (void)tally;
    return ref;
  }
}

struct context {
  const atomics_lab_options& options;
  result_table& table;
  device_facts device;
  double copy_gb_per_s = 0;
  cudaStream_t stream = nullptr;
  bool failed = false;

  timing_options timing() const { return timing_options{options.warmup, options.reps, stream}; }
  void progress(const std::string& line) const;
};

/// One way of computing an experiment's result.
struct variant {
  std::string name;
  bool baseline = false;
  std::function<void(cudaStream_t)> reset;        ///< untimed, before every run (may be empty)
  std::function<void(cudaStream_t)> run;          ///< the timed work
  std::function<std::string()> check;             ///< after a run: "" if right, else what is wrong
  /// Optional: the same kernel with counting refs; returns the global atomics it issued.
  std::function<std::uint64_t(cudaStream_t)> counted_run;
};

struct experiment_spec {
  std::string name;
  std::uint64_t size = 0;
  double bytes_per_run = 0;  ///< bytes read + written by one run (0: not a bandwidth experiment)
};

/// Validates each variant, counts its atomics where it can, then times it; adds the rows.
/// A wrong result or a CUDA error marks the variant failed (no time counted) and ctx.failed.
/// Returns the atomics counted per variant name (for the "fewer atomics" lines).
std::vector<std::pair<std::string, std::uint64_t>> measure(context& ctx, const experiment_spec& spec,
                                                           std::vector<variant>& variants);

/// Adds "global_atomics" count rows, each compared with the `reference` variant's count; `notes`
/// per variant name (e.g. the one-per-warp lower bound).
void report_counts(context& ctx, const experiment_spec& spec,
                   const std::vector<std::pair<std::string, std::uint64_t>>& counts, const std::string& reference,
                   const std::map<std::string, std::string>& notes = {});

/// Adds a skipped row when `bytes` does not fit in free device memory (with a margin); returns
/// whether it fits.
bool fits_or_skip(context& ctx, const std::string& experiment, std::uint64_t size, double bytes);

/// Host oracle helper: sum over [0, n) of f(begin, end) on all hardware threads.
template <class T, class F>
T parallel_sum(std::uint64_t n, F f) {
  const unsigned workers = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::vector<T> partial(workers, T{});
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      const std::uint64_t begin = n * w / workers, end = n * (w + 1) / workers;
      partial[w] = f(begin, end);
    });
  for (auto& t : threads) t.join();
  T total{};
  for (const T& p : partial) total += p;
  return total;
}

/// Runs f(begin, end, worker) over [0, n) on all hardware threads.
template <class F>
void parallel_for(std::uint64_t n, F f) {
  const unsigned workers = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w)
    threads.emplace_back([&, w] { f(n * w / workers, n * (w + 1) / workers, w); });
  for (auto& t : threads) t.join();
}

inline unsigned hardware_workers() { return std::max(1u, std::min(32u, std::thread::hardware_concurrency())); }

// The experiments (one .cu each).
void run_containers(context&, std::uint64_t n);
void run_max(context&, std::uint64_t n);
void run_filter(context&, std::uint64_t n);
void run_histogram(context&, std::uint64_t n);
void run_copy(context&, std::uint64_t n);

}  // namespace canopy::bench::lab
