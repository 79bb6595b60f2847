// SPDX-License-Identifier: Apache-2.0
// Is there a GPU: the one device-presence query of every Canopy component (host code, g++ or nvcc).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "canopy/cuda/error.hpp"

namespace canopy {

/// True when the CUDA runtime reports at least one usable device. Any error (no driver, no device,
/// a driver older than the runtime) counts as "none" and is cleared, so that it does not surface
/// in a later, unrelated call. Asked once per process.
inline bool gpu_available() {
  static const bool available = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return count > 0;
  }();
  return available;
}

/// The current device's name, e.g. "NVIDIA H100 80GB HBM3". Throws cuda_error without a device.
inline std::string gpu_name() {
  int device = 0;
  CANOPY_CUDA_TRY(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CANOPY_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

}  // namespace canopy
