// SPDX-License-Identifier: Apache-2.0
// An owning array in device memory: the one device buffer of every Canopy component (host code,
// g++ or nvcc). Move-only; a moved-from buffer is empty. Contents are uninitialised unless made
// from host data, uploaded or filled.
//
//   canopy::device_buffer<float> d(host_vector);            // cudaMalloc + copy
//   my_kernel<<<g, b>>>(d.data(), d.size());
//   std::vector<float> back = d.download();
//
// Why not thrust::device_vector: it value-initialises every element with a kernel, copies through
// a temporary on resize, and its header needs nvcc; the scheduler, the trees and the tool's host
// files hold device arrays from g++ translation units too.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "canopy/cuda/error.hpp"

namespace canopy {

template <class T>
class device_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "device_buffer holds trivially copyable elements");

 public:
  device_buffer() = default;
  /// `size` uninitialised elements.
  explicit device_buffer(std::size_t size) : size_(size) {
    if (size_ != 0) CANOPY_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()));
  }
  /// A device copy of `host`.
  explicit device_buffer(std::span<const T> host) : device_buffer(host.size()) { upload(host); }
  explicit device_buffer(const std::vector<T>& host) : device_buffer(std::span<const T>(host)) {}
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  device_buffer(device_buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  device_buffer& operator=(device_buffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~device_buffer() { release(); }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  bool empty() const noexcept { return size_ == 0; }

  /// Copies `host` (exactly size() elements) to the device and waits until it has landed (a
  /// pageable cudaMemcpy may return before that), so that work on any stream may read it.
  void upload(std::span<const T> host) {
    if (host.size() != size_)
      throw error(status::invalid_argument, "device_buffer::upload: " + std::to_string(host.size()) +
                                                " elements into a buffer of " + std::to_string(size_));
    if (size_ == 0) return;
    CANOPY_CUDA_TRY(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice));
    CANOPY_CUDA_TRY(cudaStreamSynchronize(nullptr));
  }
  /// The buffer's contents on the host; synchronous.
  std::vector<T> download() const {
    std::vector<T> host(size_);
    if (size_ != 0) CANOPY_CUDA_TRY(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    return host;
  }
  /// Sets every byte to `value`, stream-ordered (0xff poisons floats with NaN).
  void fill_bytes(int value, cudaStream_t stream = nullptr) {
    if (size_ != 0) CANOPY_CUDA_TRY(cudaMemsetAsync(data_, value, bytes(), stream));
  }

 private:
  void release() noexcept {
    // cudaFree can only report an earlier asynchronous error here; a destructor must not throw.
    if (data_ != nullptr) (void)cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace canopy
