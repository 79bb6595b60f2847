// Shared helpers for GPU tests (header-only; needs cuda_runtime.h and GoogleTest).
//
//  * canopy::test::gpu_available(): true when the CUDA runtime reports at least one device.
//  * CANOPY_SKIP_WITHOUT_GPU(): GTEST_SKIP()s the current test when there is none.
//  * canopy::test::gpu_test: a fixture whose SetUp skips without a device and whose TearDown
//    checks cudaDeviceSynchronize() and cudaGetLastError(), so an asynchronous kernel error
//    (a trap, an illegal address) fails the test that caused it, not a later one.
//  * CANOPY_TEST_CUDA(expr): ASSERT that a CUDA runtime call succeeded, with the error string.
//  * canopy::test::device_buffer<T>: RAII device allocation with upload/download helpers.
//
//   class warp_aggregated_gpu : public canopy::test::gpu_test {};
//   TEST_F(warp_aggregated_gpu, every_slot_once) { ... kernel<<<g, b>>>(...); ... }
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace canopy::test {

/// Whether a usable CUDA device exists. Any error (no driver, no device, a driver too old for
/// the runtime) counts as "no device"; the error is cleared so it does not leak into a test.
inline bool gpu_available() {
  static const bool available = [] {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return count > 0;
  }();
  return available;
}

inline std::string cuda_message(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

}  // namespace canopy::test

#define CANOPY_SKIP_WITHOUT_GPU()                                        \
  do {                                                                   \
    if (!::canopy::test::gpu_available()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

#define CANOPY_TEST_CUDA(expr)                                                        \
  do {                                                                                \
    const cudaError_t canopy_test_err_ = (expr);                                      \
    ASSERT_EQ(canopy_test_err_, cudaSuccess) << #expr << " -> "                       \
                                             << ::canopy::test::cuda_message(canopy_test_err_); \
  } while (0)

namespace canopy::test {

class gpu_test : public ::testing::Test {
 protected:
  void SetUp() override { CANOPY_SKIP_WITHOUT_GPU(); }

  void TearDown() override {
    if (!gpu_available()) return;
    const cudaError_t sync = cudaDeviceSynchronize();
    EXPECT_EQ(sync, cudaSuccess) << "cudaDeviceSynchronize after the test: " << cuda_message(sync);
    const cudaError_t last = cudaGetLastError();
    EXPECT_EQ(last, cudaSuccess) << "cudaGetLastError after the test: " << cuda_message(last);
  }
};

/// Owning device allocation of `size` elements of T; move-only. Throws std::runtime_error on
/// allocation failure (tests catch it as a failure). Contents are uninitialised unless filled.
template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t size) : size_(size) {
    if (size_ == 0) return;
    const cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&data_), size_ * sizeof(T));
    if (err != cudaSuccess) throw std::runtime_error("cudaMalloc: " + cuda_message(err));
  }
  explicit device_buffer(const std::vector<T>& host) : device_buffer(host.size()) { upload(host); }
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

  T* data() const { return data_; }
  std::size_t size() const { return size_; }

  void fill_zero() {
    if (size_ == 0) return;
    const cudaError_t err = cudaMemset(data_, 0, size_ * sizeof(T));
    if (err != cudaSuccess) throw std::runtime_error("cudaMemset: " + cuda_message(err));
  }
  void upload(const std::vector<T>& host) {
    if (host.size() != size_) throw std::runtime_error("device_buffer::upload: size mismatch");
    if (size_ == 0) return;
    const cudaError_t err = cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice);
    if (err != cudaSuccess) throw std::runtime_error("cudaMemcpy H2D: " + cuda_message(err));
  }
  std::vector<T> download() const {
    std::vector<T> host(size_);
    if (size_ == 0) return host;
    const cudaError_t err = cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) throw std::runtime_error("cudaMemcpy D2H: " + cuda_message(err));
    return host;
  }

 private:
  void release() noexcept {
    if (data_ != nullptr) (void)cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace canopy::test
