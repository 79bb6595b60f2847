// SPDX-License-Identifier: Apache-2.0
// A device copy of a device array, for the FMM's device-side builds (device_lists.cu) and its
// evaluator (gpu_evaluate_impl.cuh), which both keep their own copies of the tree's arrays.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include <canopy/cuda/device_buffer.hpp>
#include <canopy/cuda/error.hpp>

namespace canopy::fmm::detail {

// A device copy of n elements at `src` (device memory), on `stream`.
template <class T>
device_buffer<T> device_copy(const T* src, std::size_t n, cudaStream_t stream) {
  device_buffer<T> out(n);
  if (n != 0) CANOPY_CUDA_TRY(cudaMemcpyAsync(out.data(), src, n * sizeof(T), cudaMemcpyDeviceToDevice, stream));
  return out;
}

}  // namespace canopy::fmm::detail
