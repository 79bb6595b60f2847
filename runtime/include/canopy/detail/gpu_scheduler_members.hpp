// SPDX-License-Identifier: Apache-2.0
// The host-side parts a canopy::gpu_scheduler holds by value (canopy/gpu_scheduler.cuh): the
// mapped run report and the guard against two host threads running one scheduler at once.
// Host code only (the CUDA runtime API), so the public header can declare the class before the
// definitions in detail/gpu_scheduler.inl.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <string>
#include <utility>

#include "canopy/config.hpp"
#include "canopy/cuda/error.hpp"
#include "canopy/detail/scheduler_state.hpp"
#include "canopy/status.hpp"

namespace canopy::detail {

/// The run report lives in mapped pinned host memory, so that the host reads a run's status
/// without a copy and can raise the abort flag while the kernel runs. Move-only; a moved-from
/// report holds neither pointer.
class mapped_report {
 public:
  mapped_report() = default;
  static mapped_report allocate() {
    mapped_report r;
    cuda_check(cudaHostAlloc(reinterpret_cast<void**>(&r.host_), sizeof(run_report), cudaHostAllocMapped), "cudaHostAlloc");
    *r.host_ = run_report{0, no_task, 0, 0};
    cuda_check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&r.device_), r.host_, 0), "cudaHostGetDevicePointer");
    return r;
  }
  mapped_report(const mapped_report&) = delete;
  mapped_report& operator=(const mapped_report&) = delete;
  mapped_report(mapped_report&& o) noexcept
      : host_(std::exchange(o.host_, nullptr)), device_(std::exchange(o.device_, nullptr)) {}
  mapped_report& operator=(mapped_report&& o) noexcept {
    if (this != &o) {
      release();
      host_ = std::exchange(o.host_, nullptr);
      device_ = std::exchange(o.device_, nullptr);
    }
    return *this;
  }
  ~mapped_report() { release(); }

  run_report* operator->() const noexcept { return host_; }
  run_report* host() const noexcept { return host_; }
  run_report* device() const noexcept { return device_; }

 private:
  void release() noexcept {
    if (host_ != nullptr) (void)cudaFreeHost(host_);
    host_ = device_ = nullptr;
  }
  run_report* host_ = nullptr;
  run_report* device_ = nullptr;
};

/// Held while one host thread is inside run() or run_async() of a scheduler: a second thread's
/// call is refused with invalid_argument instead of enqueueing a run over the same queues and
/// counters. On the heap so that the scheduler stays movable.
struct gpu_call_guard {
  std::atomic<bool> busy{false};
  class hold {
   public:
    explicit hold(gpu_call_guard& g, const char* call) : g_(g) {
      if (g_.busy.exchange(true, std::memory_order_acquire))
        throw error(status::invalid_argument, std::string("gpu backend: ") + call +
                                                  " while another thread is in run() or run_async() of this scheduler "
                                                  "(one caller at a time; use a scheduler per thread)");
    }
    hold(const hold&) = delete;
    hold& operator=(const hold&) = delete;
    ~hold() { g_.busy.store(false, std::memory_order_release); }

   private:
    gpu_call_guard& g_;
  };
};

}  // namespace canopy::detail
