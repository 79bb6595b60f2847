// SPDX-License-Identifier: Apache-2.0
// The GoogleTest side of GPU tests, on the public CUDA layer (canopy/cuda/: canopy::device_buffer,
// canopy::cuda_message, canopy::gpu_available, CANOPY_CUDA_TRY). Header-only; needs GoogleTest.
//
//  * CANOPY_SKIP_WITHOUT_GPU(): GTEST_SKIP()s the current test when the machine has no GPU (no
//    device, or no driver: means_no_gpu), and fails it for any other CUDA error (a broken driver
//    or device is a failure to see, not a reason to skip).
//  * canopy::test::gpu_test: a fixture whose SetUp skips without a device and whose TearDown
//    checks cudaDeviceSynchronize() and cudaGetLastError(), so an asynchronous kernel error
//    (a trap, an illegal address) fails the test that caused it, not a later one.
//  * CANOPY_TEST_CUDA(expr): ASSERT that a CUDA runtime call succeeded, with the error's name
//    (a test failure, where CANOPY_CUDA_TRY would throw).
//
//   class warp_aggregated_gpu : public canopy::test::gpu_test {};
//   TEST_F(warp_aggregated_gpu, every_slot_once) { canopy::device_buffer<int> d(n); ... }
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "canopy/cuda/device.hpp"
#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/error.hpp"

namespace canopy::test {
/// Whether cudaGetDeviceCount's answer means "this machine has no GPU", the only reason a GPU test
/// may skip: no device (cudaErrorNoDevice, or success with none), or no driver
/// (cudaErrorInsufficientDriver, what a machine without the NVIDIA driver answers).
inline bool means_no_gpu(cudaError_t error, int count) {
  return error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver || (error == cudaSuccess && count == 0);
}
}  // namespace canopy::test

#define CANOPY_SKIP_WITHOUT_GPU()                                                                         \
  do {                                                                                                    \
    int canopy_device_count_ = 0;                                                                         \
    const cudaError_t canopy_count_err_ = cudaGetDeviceCount(&canopy_device_count_);                      \
    if (::canopy::test::means_no_gpu(canopy_count_err_, canopy_device_count_)) {                          \
      (void)cudaGetLastError();                                                                           \
      GTEST_SKIP() << "no CUDA device (" << ::canopy::cuda_message(canopy_count_err_) << ")";             \
    }                                                                                                     \
    ASSERT_EQ(canopy_count_err_, cudaSuccess)                                                             \
        << "cudaGetDeviceCount: " << ::canopy::cuda_message(canopy_count_err_)                            \
        << " (a CUDA error other than a missing device or driver: the test fails instead of skipping)"; \
  } while (0)

#define CANOPY_TEST_CUDA(expr)                                                                          \
  do {                                                                                                  \
    const cudaError_t canopy_test_err_ = (expr);                                                        \
    ASSERT_EQ(canopy_test_err_, cudaSuccess) << #expr << " -> " << ::canopy::cuda_message(canopy_test_err_); \
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

}  // namespace canopy::test
