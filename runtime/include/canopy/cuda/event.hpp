// SPDX-License-Identifier: Apache-2.0
// A CUDA event, owned: the stream-time clock of the benchmark, the tool and the examples (host
// code, g++ or nvcc). Move-only.
//
//   canopy::cuda_event start, stop;
//   start.record(stream); enqueue_work(stream); stop.record(stream);
//   float ms = canopy::elapsed_ms(start, stop);   // waits for `stop`
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "canopy/cuda/error.hpp"

namespace canopy {

class cuda_event {
 public:
  cuda_event() { CANOPY_CUDA_TRY(cudaEventCreate(&event_)); }
  cuda_event(const cuda_event&) = delete;
  cuda_event& operator=(const cuda_event&) = delete;
  cuda_event(cuda_event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  cuda_event& operator=(cuda_event&& other) noexcept {
    if (this != &other) {
      release();
      event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
  }
  ~cuda_event() { release(); }

  void record(cudaStream_t stream = nullptr) { CANOPY_CUDA_TRY(cudaEventRecord(event_, stream)); }
  void synchronize() const { CANOPY_CUDA_TRY(cudaEventSynchronize(event_)); }
  cudaEvent_t get() const noexcept { return event_; }

 private:
  void release() noexcept {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
    event_ = nullptr;
  }
  cudaEvent_t event_ = nullptr;
};

/// Milliseconds from `start` to `stop`, after waiting for `stop`.
inline float elapsed_ms(const cuda_event& start, const cuda_event& stop) {
  stop.synchronize();
  float ms = 0;
  CANOPY_CUDA_TRY(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return ms;
}

}  // namespace canopy
