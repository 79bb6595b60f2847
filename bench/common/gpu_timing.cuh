// SPDX-License-Identifier: Apache-2.0
// GPU timing for benchmarks (nvbench's concepts in a small harness of our own): CUDA-event timing
// of a callable with warm-up, every repetition bracketed by its own event pair; the device copy
// bandwidth that bandwidth figures are compared against. Errors, device buffers and the device
// query are the runtime's public CUDA layer (canopy/cuda/).
//
//   canopy::bench::timing t = canopy::bench::time_gpu(
//       [&](cudaStream_t s) { my_kernel<<<grid, block, 0, s>>>(...); },   // timed
//       {.warmup = 3, .reps = 20},
//       [&](cudaStream_t s) { cudaMemsetAsync(d_count, 0, 4, s); });       // untimed, before each rep
//   // t.median_us, t.min_us, t.max_us, t.samples_us
//
// Header-only; include from .cu files (host code only, no kernels besides the callable's).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <canopy/cuda/device.hpp>
#include <canopy/cuda/device_buffer.hpp>
#include <canopy/cuda/error.hpp>
#include <canopy/cuda/event.hpp>

#include "common/stats.hpp"

namespace canopy::bench {

struct timing_options {
  int warmup = 3;                ///< untimed runs first (clocks, caches, lazy module loading)
  int reps = 20;                 ///< timed runs; the design asks for a median of at least 20
  cudaStream_t stream = nullptr; ///< stream the work and the events go to
};

struct timing {
  double median_us = 0;
  double min_us = 0;
  double max_us = 0;
  std::vector<double> samples_us;  ///< one per timed repetition, in run order
};

/// A setup step that does nothing (the default for time_gpu's before_each).
struct no_setup {
  void operator()(cudaStream_t) const {}
};

/// Times `work(stream)`, which enqueues GPU work on the stream, with CUDA events: `warmup` untimed
/// runs, then `reps` runs each between its own start/stop event pair; `before_each(stream)` is
/// enqueued before every run (warm-up included) outside the events, for resets. The host waits
/// once at the end, so runs go back to back and the samples hold GPU time only. A launch error
/// or an asynchronous fault throws cuda_error.
template <class Work, class Setup = no_setup>
timing time_gpu(Work&& work, const timing_options& options = {}, Setup&& before_each = Setup{}) {
  if (options.reps < 1) throw std::invalid_argument("time_gpu: reps must be at least 1");
  const cudaStream_t stream = options.stream;
  for (int i = 0; i < options.warmup; ++i) {
    before_each(stream);
    work(stream);
    CANOPY_CUDA_TRY(cudaGetLastError());
  }
  std::vector<canopy::cuda_event> start(static_cast<std::size_t>(options.reps)), stop(start.size());
  timing result;
  for (std::size_t i = 0; i < start.size(); ++i) {
    before_each(stream);
    start[i].record(stream);
    work(stream);
    CANOPY_CUDA_TRY(cudaGetLastError());
    stop[i].record(stream);
  }
  stop.back().synchronize();
  for (std::size_t i = 0; i < start.size(); ++i)
    result.samples_us.push_back(1000.0 * static_cast<double>(canopy::elapsed_ms(start[i], stop[i])));
  const summary s = summarize(result.samples_us);
  result.median_us = s.median;
  result.min_us = s.min;
  result.max_us = s.max;
  return result;
}

/// One element of a device buffer, copied to the host (synchronous): a kernel's count or tally.
template <class T>
T download_one(const canopy::device_buffer<T>& buffer, std::size_t index = 0) {
  if (index >= buffer.size())
    throw canopy::error(canopy::status::invalid_argument, "download_one: index " + std::to_string(index) +
                                                              " of a buffer of " + std::to_string(buffer.size()));
  T value;
  CANOPY_CUDA_TRY(cudaMemcpy(&value, buffer.data() + index, sizeof(T), cudaMemcpyDeviceToHost));
  return value;
}

/// Device-to-device copy bandwidth in GB/s (1e9 bytes/s): cudaMemcpyDeviceToDevice of `bytes`,
/// counting the bytes read plus the bytes written (2 * bytes per copy), median of `reps` timed
/// copies after one warm-up. This is the practical ceiling for a bandwidth-bound kernel
/// (H100 SXM: about 2.8-3.0 TB/s). Halves `bytes` until the two buffers fit in free memory.
inline double measure_copy_bandwidth(std::size_t bytes = std::size_t{1} << 30, int reps = 10,
                                     cudaStream_t stream = nullptr) {
  std::size_t free_bytes = 0, total_bytes = 0;
  CANOPY_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  while (bytes > (std::size_t{1} << 20) && 2 * bytes + (std::size_t{256} << 20) > free_bytes) bytes /= 2;
  device_buffer<unsigned char> src(bytes), dst(bytes);
  CANOPY_CUDA_TRY(cudaMemsetAsync(src.data(), 1, bytes, stream));
  const timing t = time_gpu(
      [&](cudaStream_t s) {
        CANOPY_CUDA_TRY(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s));
      },
      timing_options{1, reps, stream});
  return 2.0 * static_cast<double>(bytes) / (t.median_us * 1e-6) / 1e9;
}

/// The facts about the device a result file should carry.
struct device_facts {
  int ordinal = 0;
  std::string name;
  int sm_count = 0;
  int compute_major = 0;
  int compute_minor = 0;
  std::size_t global_memory_bytes = 0;
};

inline device_facts query_device(int ordinal = -1) {
  if (ordinal < 0) CANOPY_CUDA_TRY(cudaGetDevice(&ordinal));
  cudaDeviceProp prop{};
  CANOPY_CUDA_TRY(cudaGetDeviceProperties(&prop, ordinal));
  return device_facts{ordinal, prop.name, prop.multiProcessorCount, prop.major, prop.minor, prop.totalGlobalMem};
}

}  // namespace canopy::bench
