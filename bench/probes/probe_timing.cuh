// Shared by the tuning probes in tools/dev (not part of the suite): the median of `reps` calls of
// `f` (each enqueues work and waits), timed with CUDA events around the call after 3 warm-ups.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

template <class F>
double median_us(F&& f, int reps = 50) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> v;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    v.push_back(ms * 1e3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
